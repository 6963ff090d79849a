/**
 * The frame: navigation, the live indicator, the token prompt, and the view
 * of the current route. The app first reads /api/stats: a 401 there (or on
 * any later call) shows the prompt instead of the view.
 */
import { useEffect, useState } from "preact/hooks";
import { call, onUnauthorized } from "../api.js";
import { live, useConnected } from "../live.js";
import { useRoute } from "../router.js";
import { ConversationDetail, ConversationList } from "./Conversations.js";
import { AttemptDetail, DispatchBoard } from "./Dispatch.js";
import { Overview } from "./Overview.js";
import { Providers } from "./Providers.js";
import { TaskDetail } from "./TaskDetail.js";
import { TaskList } from "./TaskList.js";
import { TokenPrompt } from "./TokenPrompt.js";

type Access = "checking" | "ok" | "token";

export function App() {
  const route = useRoute();
  const connected = useConnected();
  const [access, setAccess] = useState<Access>("checking");
  const [problem, setProblem] = useState<string | null>(null);

  const check = () => {
    call("/api/stats").then(
      () => {
        setAccess("ok");
        setProblem(null);
        live.start();
      },
      (e: Error & { status?: number }) => {
        if (e.status === 401) return;
        setProblem(e.message);
        setAccess("ok");
      },
    );
  };

  useEffect(() => {
    const off = onUnauthorized(() => {
      live.stop();
      setAccess("token");
    });
    check();
    return off;
  }, []);

  return (
    <div class="app">
      <header class="top">
        <a class="brand" href="#/">
          Ratchet
        </a>
        <nav>
          <a href="#/" class={route.view === "overview" ? "active" : ""}>
            Overview
          </a>
          <a href="#/tasks" class={route.view === "tasks" || route.view === "task" ? "active" : ""}>
            Tasks
          </a>
          <a
            href="#/conversations"
            class={route.view === "conversations" || route.view === "conversation" ? "active" : ""}
          >
            Conversations
          </a>
          <a href="#/dispatch" class={route.view === "dispatch" || route.view === "attempt" ? "active" : ""}>
            Dispatch
          </a>
          <a href="#/providers" class={route.view === "providers" ? "active" : ""}>
            Providers
          </a>
        </nav>
        <span class={`live ${connected ? "on" : "off"}`} data-live={connected ? "on" : "off"}>
          {connected ? "live" : "offline"}
        </span>
      </header>
      <main>
        {problem && <p class="problem">{problem}</p>}
        {access === "token" && <TokenPrompt onAccepted={check} />}
        {access === "ok" && route.view === "overview" && <Overview />}
        {access === "ok" && route.view === "tasks" && (
          <TaskList key={JSON.stringify(route.filters)} filters={route.filters} />
        )}
        {access === "ok" && route.view === "task" && <TaskDetail key={route.id} id={route.id} />}
        {access === "ok" && route.view === "conversations" && <ConversationList />}
        {access === "ok" && route.view === "conversation" && (
          <ConversationDetail key={route.id} id={route.id} />
        )}
        {access === "ok" && route.view === "dispatch" && <DispatchBoard />}
        {access === "ok" && route.view === "attempt" && <AttemptDetail key={route.id} id={route.id} />}
        {access === "ok" && route.view === "providers" && <Providers />}
      </main>
    </div>
  );
}
