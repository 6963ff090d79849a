/** The scenarios the runner knows, by the name `--scenario` takes. Numbers refer to issue 7. */
import type { Scenario } from "../scenario.js";
import { ambiguous, pgambiguous } from "./ambiguous.js";
import { crash } from "./crash.js";
import { model } from "./model.js";
import { pgrestart } from "./pgrestart.js";
import { pgstorm } from "./pgstorm.js";
import { poison } from "./poison.js";
import { shutdown } from "./shutdown.js";
import { stall } from "./stall.js";
import { storm } from "./storm.js";

export const SCENARIOS: Record<string, Scenario> = {
  storm, // 1. SIGKILL storm on SQLite
  pgstorm, // 2. SIGKILL storm on PostgreSQL
  stall, // 3. event-loop stall
  pgrestart, // 4. PostgreSQL restart and killed connections
  ambiguous, // 5. ambiguous commits
  pgambiguous, // 5. ambiguous commits on PostgreSQL
  crash, // 6. SQLite process-crash consistency
  poison, // 7. poison tasks
  shutdown, // 9. graceful shutdown
  model, // 10. model-based simulation
};
