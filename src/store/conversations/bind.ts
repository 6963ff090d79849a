/**
 * The conversation operations of a store, bound to its way of running a program: `write` in one
 * write transaction, `read` outside one where the backend allows it. Both stores build theirs here,
 * so each operation's program is chosen in one place.
 */
import type { Program } from "../tree/program.js";
import * as conv from "./conversations.js";
import * as sub from "./submissions.js";
import { liveInScope } from "./tasks.js";
import type { ConversationOps } from "./types.js";

export type ProgramRunner = <R>(p: () => Program<R>) => Promise<R>;

export function conversationOps(write: ProgramRunner, read: ProgramRunner = write): ConversationOps {
  return {
    createConversation: (c) => write(() => conv.createConversation(c)),
    getConversation: (id) => read(() => conv.getConversation(id)),
    listConversations: (f) => read(() => conv.listConversations(f)),
    deleteConversation: (id) => write(() => conv.deleteConversation(id)),
    forkConversation: (from, at, into) => write(() => conv.forkConversation(from, at, into)),
    commitConversation: (c) => write(() => conv.commitConversation(c)),
    entries: (id, range) => read(() => conv.entries(id, range)),
    contextEntries: (id, limit) => read(() => conv.contextEntries(id, limit)),
    entriesByTask: (taskId, limit) => read(() => conv.entriesByTask(taskId, limit)),
    conversationState: (id) => read(() => conv.conversationState(id)),
    submit: (r) => write(() => sub.submit(r)),
    submission: (id) => read(() => sub.submission(id)),
    inbox: (id, limit) => read(() => sub.inbox(id, limit)),
    runInputs: (run) => read(() => sub.runInputs(run)),
    turnBoundary: (r) => write(() => sub.turnBoundary(r)),
    finishRun: (r) => write(() => sub.finishRun(r)),
    settleEndedRun: (id) => write(() => sub.settleEndedRun(id)),
    liveInScope: (scope) => read(() => liveInScope(scope)),
    closeConversation: (id) => write(() => sub.closeConversation(id)),
    abortConversation: (id, background) => write(() => sub.abortConversation(id, background)),
    withdrawQueued: (id, reason) => write(() => sub.withdrawQueued(id, reason)),
  };
}
