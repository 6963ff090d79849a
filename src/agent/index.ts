/**
 * `@ratchet-engine/ratchet/agent`: conversations, entries, submissions and the inbox (spec §17), the state an agent
 * lives in. A run is an application-defined task (`defineRun`); model turns plug into it later.
 */

export { ConversationBusyError } from "../errors.js";
export { conversationScope } from "../store/conversations/tasks.js";
export type {
  CommitResult,
  ConversationRecord,
  DeliveryMode,
  EntryKind,
  EntryRecord,
  FinishResult,
  SubmissionRecord,
  SubmissionStatus,
  WhenBusy,
} from "../store/conversations/types.js";
export { ENTRY_KINDS } from "../store/conversations/types.js";
export { CONVERSATION_LIMITS } from "../store/conversations/validate.js";
export {
  type AgentSpec,
  type AssistantData,
  DEFAULT_MAX_TURNS,
  defineAgent,
  promptOf,
  type ToolResultData,
} from "./agent.js";
export {
  type CompactionPolicy,
  type CompactResult,
  compact,
  contextFor,
  entryTokens,
  isContextOverflow,
  promptTokens,
} from "./compaction.js";
export {
  AGENT_CONFIG_KEY,
  type AgentConfig,
  agentConfigOf,
  checkAgentConfig,
  setAgentConfig,
  THINKING_LEVELS,
  type ThinkingLevel,
} from "./config.js";
export type {
  CommitInput,
  ConversationsOptions,
  CreateOptions,
  EntryInput,
  SubmitOptions,
} from "./conversations.js";
export { Conversations } from "./conversations.js";
// The execution environment of a conversation's tools (spec §19.1–§19.5).
export { type EnvConformanceOptions, registerEnvConformance } from "./env/conformance.js";
export { LocalEnv, type LocalEnvOptions } from "./env/local.js";
export type {
  EnvErrorKind,
  ExecOptions,
  ExecResult,
  ExecutionEnv,
  FileInfo,
  FileKind,
  ProcessGroupRecord,
  ReadOptions,
  ReapOutcome,
  WriteOptions,
} from "./env/types.js";
export { EnvError } from "./env/types.js";
// Extensions and system-prompt sections (spec §19.23–§19.25).
export {
  createExtensions,
  defineExtension,
  type Extension,
  type ExtensionSpec,
  Extensions,
  type PromptSection,
  type SectionInput,
  section,
} from "./extensions.js";
export { type AgentHooks, composeHooks, type HooksSpec } from "./hooks.js";
// Reset and handoff (spec §19.26–§19.27).
export { type ControlInput, handoff, type ResetData, reset } from "./reset.js";
export type { RunDefinition, RunInput, RunSpec, TenantSeat } from "./run.js";
export { defineRun, RUN_SEAT_GROUP, RUN_TENANT_GROUP, RunContext, runsAmong } from "./run.js";
export { defineSubagent, type Subagent, type SubagentOptions } from "./subagents.js";
export type { Settled } from "./submission.js";
export { Submission } from "./submission.js";
// Tools and the built-in coding tools (spec §19.6–§19.9).
export { BASH_DEFAULT_TIMEOUT_MS, bashTool } from "./tools/bash.js";
export {
  defineToolCalls,
  MAX_CALLS_PER_ROUND,
  type ToolCall,
  type ToolCallInput,
  type ToolCallOutcome,
  type ToolCalls,
  type ToolCallsOptions,
} from "./tools/calls.js";
export {
  defineTool,
  runTool,
  type ToolContext,
  type ToolDefinition,
  type ToolResult,
  type ToolSpec,
} from "./tools/define.js";
export { editTool, findTool, globToRegExp, grepTool, lsTool, readTool, writeTool } from "./tools/files.js";
export { HeadTail, type TruncateLimits, truncateText } from "./tools/truncate.js";
export { type WatchOptions, watchEntries } from "./watch.js";
