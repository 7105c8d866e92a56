-- when the caller of a pending request stopped waiting for its decision
-- (its wait ran out, or it went away), so the approver knows nobody is
-- waiting on the answer.
alter table approvals add column caller_left_at timestamptz;
