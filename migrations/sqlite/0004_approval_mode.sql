-- the caller's mode on each approval request, so the approver sees it.
alter table approvals add column mode text;
