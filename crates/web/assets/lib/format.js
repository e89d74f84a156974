// How values read: dates in the reader's locale and time zone, money in
// the API's integer cents.

const dateTime = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "short" });
const relative = new Intl.RelativeTimeFormat(undefined, { numeric: "auto" });

/** @param {string | null | undefined} iso */
export function formatDate(iso) {
  return iso ? dateTime.format(new Date(iso)) : "—";
}

/**
 * "3 minutes ago", "in 2 days".
 * @param {string | null | undefined} iso
 * @param {number} [now]
 */
export function ago(iso, now = Date.now()) {
  if (!iso) return "Never";
  const seconds = (new Date(iso).getTime() - now) / 1000;
  /** @type {[Intl.RelativeTimeFormatUnit, number][]} */
  const units = [
    ["year", 31536000],
    ["month", 2592000],
    ["day", 86400],
    ["hour", 3600],
    ["minute", 60],
  ];
  for (const [unit, size] of units) {
    if (Math.abs(seconds) >= size) return relative.format(Math.round(seconds / size), unit);
  }
  return relative.format(Math.round(seconds), "second");
}

/** @param {number} cents */
export function money(cents) {
  return new Intl.NumberFormat(undefined, { style: "currency", currency: "USD" }).format(cents / 100);
}

/** @param {number} seconds */
export function duration(seconds) {
  const s = Math.round(seconds);
  const m = Math.floor(s / 60);
  return m ? `${m}:${String(s % 60).padStart(2, "0")}` : `${s} s`;
}

/** An API value as words: "no_answer" reads "No answer". @param {string} s */
export function humanize(s) {
  return s.replace(/_/g, " ").replace(/^./, (c) => c.toUpperCase());
}
