// A web call from the dashboard: the microphone first (a refusal places no
// call), then the call placed with the signed-in member's session like any
// API request, then its audio over the call's socket (webcall-audio.js).

import { api } from "./api.js";
import { openAudio } from "./webcall-audio.js";

/**
 * @typedef {import("./webcall-audio.js").CallState} CallState
 * @typedef {import("./webcall-audio.js").PlaybackStats} PlaybackStats
 * @typedef {import("./webcall-audio.js").WebCall} WebCall
 * @typedef {import("./webcall-audio.js").Handlers & {onCall?: (call: {id: string}) => void}} Handlers
 */

/**
 * Starts a web call with `agentId`; `handlers.onState` hears it ring, talk
 * and end (with why, when it ended on an error).
 * @param {number} agentId
 * @param {Handlers} handlers
 * @returns {Promise<WebCall>}
 */
export async function startWebCall(agentId, handlers) {
  handlers.onState("connecting");
  const audio = await openAudio(location.origin);
  try {
    // A new key per call: each press is a new call, never a replay.
    const call = await api("POST", "/api/v1/calls", {
      body: { agent_id: agentId, transport: "web" },
      headers: { "Idempotency-Key": crypto.randomUUID() },
    });
    handlers.onCall?.(call);
    handlers.onState("ringing");
    return audio.join(call.web, handlers);
  } catch (e) {
    audio.close();
    throw e;
  }
}
