-- Post-call analysis: the summary, extracted data and success evaluation
-- drawn from a call once it ends (the call's `analysis`).
ALTER TABLE calls ADD COLUMN analysis JSONB;
