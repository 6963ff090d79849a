/** The dashboard: one page over the JSON API and the event stream of the server that serves it. */
import { render } from "preact";
import { App } from "./views/App.js";
import "./style.css";

const root = document.getElementById("app");
if (root) render(<App />, root);
