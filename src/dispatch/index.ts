/**
 * `@ratchet-engine/ratchet/dispatch`: supervise work that runs outside Ratchet's processes
 * (spec §20). The pure rules live in src/core/dispatch; this entry point
 * exports them with the worker adapters and their contract suite.
 */
export type {
  ActionKind,
  BoundName,
  Decision,
  ReadingAction,
  RuleName,
  WakeSource,
} from "../core/dispatch/actions.js";
export { BOUND_NAMES } from "../core/dispatch/actions.js";
export { findWaitingSince, pickRunningBound, RUNNING_BOUNDS } from "../core/dispatch/bounds.js";
export { type AttemptReason, type Explanation, explainAttempt } from "../core/dispatch/explain.js";
export {
  attemptTrailers,
  type FoundPull,
  findPullUrls,
  type PullRef,
  parsePullUrl,
  parseTrailers,
  pullKey,
  type Trailer,
} from "../core/dispatch/links.js";
export {
  ATTEMPT_MODES,
  type AttemptMode,
  type AttemptState,
  type AttemptView,
  type Attention,
  CLOSING_CAUSES,
  CLOSING_FAILURE,
  type ClosingCause,
  FORCED_FAILURES,
  type ForcedFailure,
  isLiveState,
  LIVE_ATTEMPT_STATES,
  type LiveAttemptState,
  READING_KINDS,
  type ReadingKind,
  type SessionReading,
  stretchStart,
} from "../core/dispatch/model.js";
export {
  definePipeline,
  type Edge,
  type EdgeKey,
  type Pipeline,
  PipelineError,
  type PipelineProblem,
  type PipelineSpec,
  type SpawnTemplate,
  type Step,
  type StepSpec,
} from "../core/dispatch/pipeline.js";
export {
  type ChecksState,
  decidePrWait,
  diffPull,
  explainPrWait,
  type KnownPull,
  nextCheckDelayMs,
  type PrWait,
  type PullObservation,
  type PullState,
  summarizeChecks,
  type WatchPolicy,
} from "../core/dispatch/pulls.js";
export {
  type Route,
  renderSpawn,
  routeOf,
  type SpawnContext,
  type SpawnRequest,
} from "../core/dispatch/route.js";
export {
  capacityDelayMs,
  type ItemState,
  isForgetDue,
  isKeptDue,
  type KeptSession,
  maySeat,
  resumeFallback,
  type StartOutcome,
  shouldKeep,
} from "../core/dispatch/sessions.js";
export { pickReadingAction, RECONCILE_TABLE, type ReadingInput } from "../core/dispatch/table.js";
export {
  DEFAULT_SLEEP,
  DEFAULT_STEP_TIMEOUT_MINUTES,
  DEFAULT_TIMEOUTS,
  type DispatchTimeouts,
  resolveSleep,
  resolveTimeouts,
  type SleepRules,
  TIMEOUT_ANCHORS,
} from "../core/dispatch/timeouts.js";
export type {
  AttemptEvent,
  AttemptRow,
  DispatchCapable,
  DispatchOps,
  ItemRow,
  SeatRow,
} from "../store/dispatch/ops.js";
export {
  type LinkSource,
  type PullLink,
  PullOps,
  type PullRow,
  pullOps,
} from "../store/pulls/ops.js";
export {
  buildWorkers,
  DEFAULT_DISPATCH_CONFIG,
  type DispatchConfig,
  readDispatchConfig,
  type WorkerConfig,
} from "./config.js";
export { type BuiltForges, buildForges, type ForgeConfig, forgeConfigsOf } from "./forge/config.js";
export { FakeForge, ForgeModel, type ModelPull, type ScriptedFailure } from "./forge/fake.js";
export {
  type Forge,
  ForgeError,
  type ForgeErrorKind,
  type PullCommit,
  type PullNumberRef,
  type PullStatus,
  type RepoRef,
} from "./forge/forge.js";
export { GitHubForge, type GitHubForgeOptions } from "./forge/github.js";
export { type Look, PullWatcher, type PullWatcherOptions, type WatchReport } from "./forge/watcher.js";
export { type OutboxConfig, outboxOptionsOf, type SinkConfig } from "./outbox/config.js";
export { noticeOf, noticeSink, nullNotifier, WebhookNotifier } from "./outbox/notices.js";
export { type Destination, OutboxSender, type SenderOptions, type SendReport } from "./outbox/sender.js";
export {
  BATCH_TYPE,
  batchBody,
  FileSink,
  StdoutSink,
  WebhookSink,
  type WebhookSinkOptions,
} from "./outbox/sinks.js";
export { type DestinationStatus, outboxStatus } from "./outbox/status.js";
export {
  type Batch,
  DeliveryError,
  type Fact,
  NOTICE_KINDS,
  type Notice,
  type NoticeKind,
  type Notifier,
  type Sink,
} from "./outbox/types.js";
export type { RunnerOptions } from "./runner/context.js";
export { DEFAULT_OUTPUT_SCAN_MS, OUTPUT_SCAN_BYTES } from "./runner/output.js";
export { DispatchRunner, type PassReport } from "./runner/runner.js";
export { outcomeOf } from "./runner/settle.js";
export { type ForgeContractOptions, registerForgeContract } from "./testing/forge-contract.js";
export { type GitHubMock, startGitHubMock } from "./testing/github-mock.js";
export {
  type DispatchStore,
  type DispatchStoreContractOptions,
  registerDispatchStoreContract,
} from "./testing/store-contract.js";
export {
  type Behaviour,
  CONTRACT_PR_URL,
  dirControls,
  FLOOD_LINE,
  registerWorkerContract,
  shellBehaviour,
  type WorkerContractOptions,
} from "./testing/worker-contract.js";
export type {
  Closeout,
  ControlOutcome,
  ForgetOutcome,
  OutputOptions,
  OutputOutcome,
  RefusalCause,
  WorkerAdapter,
} from "./workers/adapter.js";
export { FakeSession, FakeWorker, type FakeWorkerOptions } from "./workers/fake.js";
export { ProcessWorker, type ProcessWorkerOptions } from "./workers/process.js";
export { TmuxWorker, type TmuxWorkerOptions } from "./workers/tmux.js";
