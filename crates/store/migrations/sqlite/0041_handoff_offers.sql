-- A handoff to a person is offered to one available member at a time
-- (round-robin: the one offered longest ago), and again to the next while
-- nobody accepts it.
ALTER TABLE handoffs ADD COLUMN offered_user_id INTEGER;
ALTER TABLE handoffs ADD COLUMN offered_at INTEGER;
ALTER TABLE handoffs ADD COLUMN offers INTEGER NOT NULL DEFAULT 0;
ALTER TABLE member_presence ADD COLUMN last_offered_at INTEGER;
