-- Claims a job's lease lapsed before (its process died mid-run, or stopped
-- renewing), since it last finished an attempt: a job cut off this many
-- times in a row is buried instead of run again (crates/jobs).
ALTER TABLE jobs ADD COLUMN interruptions INTEGER NOT NULL DEFAULT 0;
