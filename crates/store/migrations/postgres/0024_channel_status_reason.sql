-- Why a channel is in `error` (its provider refused its credentials).
ALTER TABLE channels ADD COLUMN status_reason TEXT;
