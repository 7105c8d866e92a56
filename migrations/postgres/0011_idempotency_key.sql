-- the idempotency-key header of the http call that made a run: a retry by
-- the same caller with the same key gets this run instead of a new one.
-- unique per caller (no token is one caller, ''), so two racing requests
-- with one key cannot both insert a run: the loser rejoins the winner's.
alter table runs add column idempotency_key text;
create unique index runs_idempotency_key on runs (coalesce(requested_by, ''), idempotency_key)
    where idempotency_key is not null;
-- a held call's retry looks for the caller's pending request of the same call.
create index approvals_pending_caller on approvals (requested_by, skill, tool) where status = 'pending';
