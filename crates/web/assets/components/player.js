// A call recording's player: the browser's own audio controls (keyboard
// and screen-reader ready, seeking by HTTP range requests) above a stereo
// waveform — the caller on the left channel, the agent on the right — that
// shows what has played and seeks on a click. The waveform's peaks come
// from the API (about 10 KB for any length), so a long call's page does
// not download its whole recording to draw it.

import { api } from "../lib/api.js";
import { html, useEffect, useRef, useState } from "../lib/html.js";

/** @typedef {{caller: number[], agent: number[]}} Peaks (thousandths of full scale) */

/**
 * @param {{callId: string, src: string, durationMs: number | null | undefined,
 *   audio: {current: HTMLAudioElement | null}, onTime: (ms: number) => void}} p
 */
export function RecordingPlayer({ callId, src, durationMs, audio, onTime }) {
  const canvas = useRef(/** @type {HTMLCanvasElement | null} */ (null));
  const [peaks, setPeaks] = useState(/** @type {Peaks | null} */ (null));
  const [waveError, setWaveError] = useState("");
  const [position, setPosition] = useState(0);

  // Playback does not wait for the waveform.
  useEffect(() => {
    const control = new AbortController();
    setPeaks(null);
    api("GET", `/api/v1/calls/${encodeURIComponent(callId)}/recording/waveform`, {
      query: { points: 1200 },
      signal: control.signal,
    })
      .then((w) => setPeaks({ caller: w.caller, agent: w.agent }))
      .catch((e) => {
        if (!control.signal.aborted) setWaveError(`The waveform could not be loaded: ${e.message}`);
      });
    return () => control.abort();
  }, [callId]);

  // Follow playback every frame while playing, and on every seek.
  useEffect(() => {
    const el = audio.current;
    if (!el) return;
    let frame = 0;
    const report = () => {
      const ms = el.currentTime * 1000;
      setPosition(ms);
      onTime(ms);
    };
    const tick = () => {
      report();
      if (!el.paused) frame = requestAnimationFrame(tick);
    };
    const play = () => {
      cancelAnimationFrame(frame);
      frame = requestAnimationFrame(tick);
    };
    el.addEventListener("play", play);
    el.addEventListener("seeked", report);
    el.addEventListener("timeupdate", report);
    return () => {
      cancelAnimationFrame(frame);
      el.removeEventListener("play", play);
      el.removeEventListener("seeked", report);
      el.removeEventListener("timeupdate", report);
    };
  }, [src]);

  const total = (audio.current?.duration && Number.isFinite(audio.current.duration) ? audio.current.duration * 1000 : 0) || durationMs || 0;
  useEffect(() => {
    if (canvas.current && peaks) draw(canvas.current, peaks, total ? position / total : 0);
  }, [peaks, position, total]);

  /** @param {MouseEvent} e */
  const seek = (e) => {
    const el = audio.current;
    const c = canvas.current;
    if (!el || !c || !total) return;
    const box = c.getBoundingClientRect();
    el.currentTime = (Math.min(1, Math.max(0, (e.clientX - box.left) / box.width)) * total) / 1000;
  };

  return html`<div class="player">
    <audio ref=${audio} controls preload="metadata" src=${src} aria-label="Call recording"></audio>
    <div class="waveform" aria-busy=${peaks || waveError ? "false" : "true"}>
      <div class="lanes" aria-hidden="true"><span>Caller</span><span>Agent</span></div>
      <canvas
        ref=${canvas}
        width="1200"
        height="160"
        role="img"
        aria-label="Waveform of the recording: the caller above, the agent below. Click to seek."
        onClick=${seek}
      ></canvas>
    </div>
    ${waveError && html`<p class="muted">${waveError}</p>`}
    <p><a href=${src} download>Download the recording (WAV)</a></p>
  </div>`;
}

/**
 * @param {HTMLCanvasElement} c
 * @param {Peaks} peaks
 * @param {number} played 0–1
 */
function draw(c, peaks, played) {
  const ctx = c.getContext("2d");
  if (!ctx) return;
  const style = getComputedStyle(c);
  const colour = (/** @type {string} */ name, /** @type {string} */ fallback) => style.getPropertyValue(name).trim() || fallback;
  const lanes = [
    { data: peaks.caller, done: colour("--wave-caller", "#4338ca"), rest: colour("--wave-caller-rest", "#c7c9f5") },
    { data: peaks.agent, done: colour("--wave-agent", "#116329"), rest: colour("--wave-agent-rest", "#b8dcc2") },
  ];
  const { width, height } = c;
  ctx.clearRect(0, 0, width, height);
  const lane = height / 2;
  const playedX = played * width;
  lanes.forEach(({ data, done, rest }, i) => {
    const mid = lane * i + lane / 2;
    const step = width / data.length;
    for (let x = 0; x < data.length; x++) {
      const h = Math.max(1, (data[x] / 1000) * (lane - 6));
      ctx.fillStyle = x * step < playedX ? done : rest;
      ctx.fillRect(x * step, mid - h / 2, Math.max(1, step - 0.5), h);
    }
  });
  ctx.fillStyle = colour("--text", "#18181b");
  ctx.fillRect(Math.min(width - 2, playedX), 0, 2, height);
}
