// Presence: this member's heartbeat (online, or away while the tab is
// hidden; the conversation open and whether they type in it), and what the
// other members are doing on a conversation, from the live stream's
// `presence` frames.

import { api } from "./api.js";
import { onLive } from "./live.js";
import { current } from "./session.js";
import { useEffect, useState } from "./html.js";

const BEAT_MS = 20000;
/** A typing member sends at most one beat this often. */
const TYPING_BEAT_MS = 3000;
/** Someone is "typing" this long after their last keystroke beat. */
const TYPING_FOR_MS = 8000;
/** Someone is "viewing" this long after their last beat (a beat every 20 s). */
const VIEWING_FOR_MS = 45000;

/** @type {number | null} */
let conversation = null;
/** @type {"viewing" | "typing" | null} */
let activity = null;
let lastTypingBeat = 0;
/** @type {ReturnType<typeof setTimeout> | undefined} */
let typingDone;

function beat() {
  if (current().status !== "signed-in") return;
  api("POST", "/api/v1/presence", {
    body: { status: document.hidden ? "away" : "online", conversation_id: conversation, activity: conversation ? activity : null },
  }).catch(() => {});
}

let announcing = false;

/**
 * Beats now, and twice more within six seconds, so that a member who just
 * opened this member's conversation sees them at once rather than at the
 * next beat, even while their own stream is still connecting.
 */
function announce() {
  if (announcing) return;
  announcing = true;
  beat();
  setTimeout(beat, 2000);
  setTimeout(() => {
    announcing = false;
    beat();
  }, 6000);
}

/** Beats while signed in; returns the function that stops it. */
export function startHeartbeat() {
  beat();
  const timer = setInterval(beat, BEAT_MS);
  document.addEventListener("visibilitychange", beat);
  return () => {
    clearInterval(timer);
    document.removeEventListener("visibilitychange", beat);
  };
}

/** This member has conversation `id` open (or none). @param {number | null} id */
export function viewing(id) {
  if (conversation === id) return;
  conversation = id;
  activity = id ? "viewing" : null;
  beat();
}

/** This member typed in the open conversation's composer. */
export function typing() {
  if (!conversation) return;
  activity = "typing";
  clearTimeout(typingDone);
  typingDone = setTimeout(() => {
    activity = "viewing";
  }, TYPING_FOR_MS / 2);
  if (Date.now() - lastTypingBeat >= TYPING_BEAT_MS) {
    lastTypingBeat = Date.now();
    beat();
  }
}

/** @typedef {{user_id: number, email: string, activity: "viewing" | "typing", at: number}} Other */

/**
 * The other members on conversation `id` now, typing ones first.
 * @param {number} id
 * @returns {Other[]}
 */
export function useOthersOn(id) {
  const [seen, setSeen] = useState(/** @type {Map<number, Other>} */ (new Map()));
  const [, setTick] = useState(0);
  useEffect(() => {
    const me = current().me?.user.id;
    const stop = onLive((e) => {
      if (e.event !== "presence" || e.data?.user_id === me) return;
      const d = e.data;
      setSeen((old) => {
        const next = new Map(old);
        if (d.conversation_id === id && d.status !== "offline") {
          if (!old.has(d.user_id)) announce();
          next.set(d.user_id, { user_id: d.user_id, email: d.email, activity: d.activity ?? "viewing", at: Date.now() });
        } else {
          next.delete(d.user_id);
        }
        return next;
      });
    });
    // Ages what was seen: a member who stopped beating has left.
    const timer = setInterval(() => setTick((t) => t + 1), 2000);
    return () => {
      stop();
      clearInterval(timer);
    };
  }, [id]);
  const now = Date.now();
  return [...seen.values()]
    .map((o) => (o.activity === "typing" && now - o.at > TYPING_FOR_MS ? { ...o, activity: /** @type {const} */ ("viewing") } : o))
    .filter((o) => now - o.at <= VIEWING_FOR_MS)
    .sort((a, b) => (a.activity === b.activity ? a.email.localeCompare(b.email) : a.activity === "typing" ? -1 : 1));
}
