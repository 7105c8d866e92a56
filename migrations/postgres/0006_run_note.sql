-- the approver's note on the run a person decided, so a caller reading
-- the run learns why it was denied (or what the approver said).
alter table runs add column note text;
