-- the approvers' history (GET /approvals/history): decided requests,
-- newest decision first.
create index approvals_decided on approvals (decided_at desc, id desc) where status <> 'pending';
