/**
 * Dispatch (spec §20.27): the board — each pipeline's items by step, with
 * the state of their live attempt — the seats per worker kind, and one
 * attempt's timeline of readings, decisions and moves, with Close-item and
 * Wake buttons. Live by polling the API once a second while mounted.
 */
import { useState } from "preact/hooks";
import { call, query } from "../api.js";
import { short, time } from "../format.js";
import { usePoll } from "../poll.js";

interface Attempt {
  id: string;
  itemId: string;
  pipeline: string;
  phase: string;
  worker: string;
  state: string;
  forced: string | null;
  session: string | null;
  claimedAt: number;
  endedAt: number | null;
}
interface Item {
  id: string;
  pipeline: string;
  step: string;
  state: string;
  input: string;
  attempt: Attempt | null;
}
interface Seat {
  worker: string;
  limit: number | null;
  held: number;
  backoffUntil: number | null;
}
interface Event {
  id: number;
  at: number;
  kind: string;
  detail: unknown;
}

export function attemptHref(id: string): string {
  return `#/dispatch/attempts/${id}`;
}

function Card({ item }: { item: Item }) {
  const a = item.attempt;
  return (
    <li class="card" data-item={item.id} data-state={item.state} data-attempt-state={a?.state ?? "none"}>
      <strong>#{item.id}</strong> <span class="muted">{item.state}</span>
      <div class="muted">{short(JSON.parse(item.input), 80)}</div>
      {a && (
        <div>
          <a href={attemptHref(a.id)}>attempt {a.id}</a>: {a.state} on {a.worker}
        </div>
      )}
    </li>
  );
}

export function DispatchBoard() {
  const [board, setBoard] = useState<Record<string, Record<string, Item[]>> | null>(null);
  const [seats, setSeats] = useState<Seat[]>([]);
  const error = usePoll(async () => {
    const b = await call<{ steps: Record<string, Item[]> }>("/api/dispatch/board");
    const byPipeline: Record<string, Record<string, Item[]>> = {};
    for (const items of Object.values(b.steps))
      for (const i of items) {
        byPipeline[i.pipeline] ??= {};
        byPipeline[i.pipeline]![i.step] ??= [];
        byPipeline[i.pipeline]![i.step]!.push(i);
      }
    setBoard(byPipeline);
    setSeats((await call<{ seats: Seat[] }>("/api/dispatch/seats")).seats);
  }, []);
  if (!board) return <p class="muted">{error ?? "Loading dispatch…"}</p>;
  const pipelines = Object.entries(board);
  return (
    <div data-view="dispatch">
      <h2>Dispatch</h2>
      {pipelines.length === 0 && <p class="muted">No items yet.</p>}
      {pipelines.map(([name, steps]) => (
        <section key={name} data-pipeline={name}>
          <h3>{name}</h3>
          <div class="board">
            {Object.entries(steps).map(([step, items]) => (
              <div class="column" key={step} data-step={step}>
                <h4>{step}</h4>
                <ul>
                  {items.map((i) => (
                    <Card key={i.id} item={i} />
                  ))}
                </ul>
              </div>
            ))}
          </div>
        </section>
      ))}
      <h3>Seats</h3>
      <table class="tasks" data-section="seats">
        <thead>
          <tr>
            <th>Worker</th>
            <th>Held</th>
            <th>Limit</th>
            <th>Backing off until</th>
          </tr>
        </thead>
        <tbody>
          {seats.map((s) => (
            <tr key={s.worker} data-worker={s.worker}>
              <td>{s.worker}</td>
              <td data-field="held">{s.held}</td>
              <td>{s.limit ?? "none"}</td>
              <td>{time(s.backoffUntil)}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

export function AttemptDetail({ id }: { id: string }) {
  const [data, setData] = useState<{ attempt: Attempt; events: Event[] } | null>(null);
  const [done, setDone] = useState<string | null>(null);
  const error = usePoll(async () => {
    setData(await call<{ attempt: Attempt; events: Event[] }>(`/api/dispatch/attempts/${id}${query({})}`));
  }, [id]);
  if (!data) return <p class="muted">{error ?? "Loading the attempt…"}</p>;
  const a = data.attempt;
  const act = (path: string, what: string) =>
    call(path, { json: {} }).then(
      () => setDone(what),
      (e: Error) => setDone(e.message),
    );
  return (
    <div data-view="attempt" data-attempt={a.id}>
      <h2>
        Attempt {a.id} <span data-field="state">{a.forced ? `${a.state} (${a.forced})` : a.state}</span>
      </h2>
      <p>
        item #{a.itemId} · {a.pipeline}/{a.phase} · {a.worker} · session {a.session ?? "—"} · claimed{" "}
        {time(a.claimedAt)}
      </p>
      <p>
        <button
          type="button"
          data-action="close-item"
          onClick={() => act(`/api/dispatch/items/${a.itemId}/close`, "closed")}
        >
          Close item
        </button>{" "}
        <button
          type="button"
          data-action="wake"
          onClick={() => act(`/api/dispatch/attempts/${a.id}/wake`, "wake requested")}
        >
          Wake
        </button>{" "}
        {done && <span data-field="done">{done}</span>}
      </p>
      <ol class="timeline" data-section="timeline">
        {data.events.map((e) => (
          <li key={e.id} data-kind={e.kind}>
            {time(e.at)} <strong>{e.kind}</strong> <span class="muted">{short(e.detail, 200)}</span>
          </li>
        ))}
      </ol>
    </div>
  );
}
