// "Talk to this agent": a web call from the agent's page. The panel says
// where the call is (connecting, ringing, talking, ended), offers mute and
// hang up, shows the transcript as the call goes, and leads to the call's
// page once it is over. The playback counters sit on the panel as data-*
// attributes (received, played, dropped, underruns): what a person cannot
// see, a test can read.

import { html, useEffect, useRef, useState } from "../lib/html.js";
import { api } from "../lib/api.js";
import { startWebCall } from "../lib/webcall.js";

/** @typedef {import("../lib/webcall.js").CallState} CallState */
/** @typedef {import("../lib/webcall.js").PlaybackStats} PlaybackStats */
/** @typedef {{index: number, speaker: string, text: string, interrupted: boolean}} Segment */

const SAID = {
  connecting: "Connecting your microphone…",
  ringing: "Calling…",
  talking: "Talking",
  ended: "Call ended",
};

/** @param {{agent: {id: number, name: string}}} p */
export function TalkToAgent({ agent }) {
  const [open, setOpen] = useState(false);
  const [state, setState] = useState(/** @type {CallState | null} */ (null));
  const [problem, setProblem] = useState("");
  const [callId, setCallId] = useState(/** @type {string | null} */ (null));
  const [muted, setMuted] = useState(false);
  const [stats, setStats] = useState(/** @type {PlaybackStats | null} */ (null));
  const [segments, setSegments] = useState(/** @type {Segment[]} */ ([]));
  const [seconds, setSeconds] = useState(0);
  const call = useRef(/** @type {import("../lib/webcall.js").WebCall | null} */ (null));
  const live = state === "connecting" || state === "ringing" || state === "talking";
  // Leaving the page hangs up.
  useEffect(() => () => call.current?.hangUp(), []);
  // The transcript and the clock while talking (and a last look once ended).
  useEffect(() => {
    if (!callId || (state !== "talking" && state !== "ended")) return;
    const look = () =>
      api("GET", `/api/v1/calls/${callId}/transcript`).then(
        (t) => setSegments(t.segments),
        () => {},
      );
    look();
    if (state === "ended") return;
    const began = Date.now();
    const timer = setInterval(() => {
      setSeconds(Math.floor((Date.now() - began) / 1000));
      look();
    }, 1000);
    return () => clearInterval(timer);
  }, [callId, state]);

  const start = async () => {
    setOpen(true);
    setProblem("");
    setSegments([]);
    setStats(null);
    setSeconds(0);
    setMuted(false);
    setCallId(null);
    try {
      call.current = await startWebCall(agent.id, {
        onState: (s, detail) => {
          setState(s);
          if (detail) setProblem(detail);
        },
        onCall: (c) => setCallId(c.id),
        onStats: setStats,
      });
    } catch (e) {
      setState(null);
      setProblem(e instanceof Error ? e.message : String(e));
    }
  };

  const button = html`<button type="button" onClick=${start} disabled=${live}>Talk to this agent</button>`;
  if (!open) return button;
  const clock = `${Math.floor(seconds / 60)}:${String(seconds % 60).padStart(2, "0")}`;
  return html`${button}
    <section
      class="web-call"
      aria-label=${`Web call with ${agent.name}`}
      data-received=${stats?.received ?? 0}
      data-played=${stats?.played ?? 0}
      data-dropped=${stats?.dropped ?? 0}
      data-underruns=${stats?.underruns ?? 0}
    >
      <p role="status">
        ${state ? SAID[state] : "Not connected"}${state === "talking" ? html` <span class="muted">${clock}</span>` : ""}
      </p>
      ${problem && html`<p class="notice error" role="alert">${problem}</p>`}
      ${state === "talking" &&
      html`<p class="muted">Speak as a caller would; the agent hears you through your microphone. Use headphones so it does not hear itself.</p>`}
      ${segments.length > 0 &&
      html`<ol class="web-call-transcript" aria-label="Transcript so far">
        ${segments.map(
          (s) => html`<li key=${s.index} class=${s.speaker}>
            <strong>${s.speaker === "caller" ? "You" : agent.name}</strong> ${s.text}${s.interrupted ? html` <span class="muted">(interrupted)</span>` : ""}
          </li>`,
        )}
      </ol>`}
      <div class="actions">
        ${live &&
        html`<button
            type="button"
            aria-pressed=${muted ? "true" : "false"}
            onClick=${() => {
              call.current?.mute(!muted);
              setMuted(!muted);
            }}
          >
            ${muted ? "Unmute" : "Mute"}
          </button>
          <button type="button" class="danger" onClick=${() => call.current?.hangUp()}>Hang up</button>`}
        ${state === "ended" && callId && html`<a href=${`/calls/${callId}`}>See the call</a>`}
        ${!live && html`<button type="button" class="subtle" onClick=${() => setOpen(false)}>Close</button>`}
      </div>
    </section>`;
}
