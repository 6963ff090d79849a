export type { RetryPolicy } from "./core/backoff.js";
export type { Clock, Random } from "./core/clock.js";
export type { Outcome, Status } from "./core/model.js";
export type {
  ChildOutcome,
  ChildSpec,
  EventOutcome,
  FencedWrite,
  Refusal,
  SpawnOptions,
  StepOptions,
  TaskContext,
} from "./engine/context.js";
export type { Migrated, StandardSchemaV1, TaskDefinition, TaskSpec } from "./engine/definition.js";
export { defineTask } from "./engine/definition.js";
export type { Explanation, Reason } from "./engine/explain.js";
export type { ConcurrencySpec, FairnessSpec, GateSpec, RateLimitSpec } from "./engine/gates.js";
export type { DerivedState, InspectedTask, Inspection, TaskTree, WaitingOn } from "./engine/inspect.js";
export { renderTree } from "./engine/inspect.js";
export type { Logger, OpenOptions, ScheduleDecl } from "./engine/options.js";
export { consoleLogger, silentLogger } from "./engine/options.js";
export type { PhaseContext, PhaseHandler, PhaseResult, PhaseSpec } from "./engine/phases.js";
export { definePhases } from "./engine/phases.js";
export type {
  BatchEntry,
  EnqueueOptions,
  StartOptions,
  TaskDetails,
  TickOptions,
  TickReport,
} from "./engine/ratchet.js";
export { Ratchet } from "./engine/ratchet.js";
export type { ScheduleOptions } from "./engine/schedule.js";
export type { LayerStepWrite, StepCommitWith } from "./engine/step-commit.js";
export type { StreamWriter } from "./engine/stream.js";
export type { StreamChunk } from "./engine/stream-reader.js";
export * from "./errors.js";
export type { MissedPolicy, ScheduleRow } from "./store/schedules.js";
export type {
  AbortResult,
  JobStatus,
  QueueDepth,
  QueueStats,
  StepRecord,
  Store,
  TaskEvent,
  TaskId,
  TaskRecord,
} from "./store/store.js";
