// Small charts drawn as SVG: bars per day on the home page, and a call's
// per-turn latency as stacked bars. Each is an image with a text summary
// for screen readers, and every bar has its value as a tooltip; colours
// come from the stylesheet (classes), so dark mode and the CSP hold.

import { html } from "../lib/html.js";

/**
 * Bars, one per point, on a shared zero baseline.
 * @param {{label: string, points: {label: string, value: number}[], format?: (n: number) => string, tone?: string}} p
 */
export function Bars({ label, points, format = (n) => String(n), tone = "accent" }) {
  const width = 140;
  const height = 36;
  const gap = 3;
  const max = Math.max(1, ...points.map((p) => p.value));
  const bar = (width - gap * (points.length - 1)) / Math.max(1, points.length);
  const summary = `${label}: ${points.map((p) => `${p.label} ${format(p.value)}`).join(", ")}`;
  return html`<svg class=${`bars tone-${tone}`} viewBox=${`0 0 ${width} ${height}`} role="img" aria-label=${summary}>
    ${points.map((p, i) => {
      const h = p.value > 0 ? Math.max(2, (p.value / max) * (height - 2)) : 1;
      return html`<rect
        class=${p.value > 0 ? "bar" : "bar empty"}
        x=${i * (bar + gap)}
        y=${height - h}
        width=${bar}
        height=${h}
        rx="1.5"
        ><title>${`${p.label}: ${format(p.value)}`}</title></rect
      >`;
    })}
  </svg>`;
}

/** The parts of a turn's latency, in the order they happen. */
const PARTS = /** @type {const} */ ([
  ["end_of_turn_ms", "End of turn (the wait to be sure the caller finished)", "eot"],
  ["stt_ms", "Speech to text", "stt"],
  ["llm_first_token_ms", "Model, to its first words", "llm"],
  ["tts_first_audio_ms", "Voice, to its first audio", "tts"],
]);

/**
 * @typedef {{end_of_turn_ms?: number, stt_ms: number, llm_first_token_ms: number, tts_first_audio_ms: number, voice_to_voice_ms: number}} TurnLatency
 */

/**
 * One horizontal stacked bar per answered turn: speech-to-text, the model,
 * the voice, and what remains of voice-to-voice (transport, buffering).
 * @param {{turns: {label: string, latency: TurnLatency}[]}} p
 */
export function LatencyChart({ turns }) {
  const row = 22;
  const labelWidth = 64;
  const width = 560;
  const plot = width - labelWidth - 60;
  const max = Math.max(1, ...turns.map((t) => t.latency.voice_to_voice_ms));
  const scale = (/** @type {number} */ ms) => (ms / max) * plot;
  const height = turns.length * row + 4;
  const summary = turns
    .map((t) => `${t.label}: ${t.latency.voice_to_voice_ms} ms voice to voice`)
    .join("; ");
  return html`<figure class="latency-chart">
    <svg viewBox=${`0 0 ${width} ${height}`} role="img" aria-label=${`Latency per agent turn. ${summary}`}>
      ${turns.map((t, i) => {
        const y = i * row + 2;
        let x = labelWidth;
        const parts = PARTS.map(([key, name, cls]) => {
          const ms = Math.max(0, t.latency[key] ?? 0);
          const rect = html`<rect class=${`part ${cls}`} x=${x} y=${y} width=${scale(ms)} height=${row - 6}
            ><title>${`${t.label}, ${name}: ${ms} ms`}</title></rect
          >`;
          x += scale(ms);
          return rect;
        });
        const parted = PARTS.reduce((sum, [key]) => sum + Math.max(0, t.latency[key] ?? 0), 0);
        const rest = Math.max(0, t.latency.voice_to_voice_ms - parted);
        return html`<g>
          <text class="axis" x="0" y=${y + row / 2}>${t.label}</text>
          ${parts}
          <rect class="part other" x=${x} y=${y} width=${scale(rest)} height=${row - 6}
            ><title>${`${t.label}, transport and buffering: ${Math.round(rest)} ms`}</title></rect
          >
          <text class="value" x=${labelWidth + scale(t.latency.voice_to_voice_ms) + 6} y=${y + row / 2}>
            ${t.latency.voice_to_voice_ms} ms
          </text>
        </g>`;
      })}
    </svg>
    <figcaption class="legend">
      ${PARTS.map(([, name, cls]) => html`<span><i class=${`swatch ${cls}`} aria-hidden="true"></i>${name}</span>`)}
      <span><i class="swatch other" aria-hidden="true"></i>Transport and buffering</span>
    </figcaption>
  </figure>`;
}
