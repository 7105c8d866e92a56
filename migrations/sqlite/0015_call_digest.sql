-- a held call's retry looks for the caller's pending request of the same
-- call. 0012's index gave it every pending request of the caller's tool,
-- each decoded and compared: at 10,000 pending, ×8.6 per held call. the
-- digest of the call (caller, skill, tool, skill hash, mode and canonical
-- arguments; see SameCall::digest) makes it one index look-up.
alter table approvals add column call_digest text;
create index approvals_pending_call on approvals (call_digest, created_at, id) where status = 'pending';
-- requests recorded before this have no digest (sql cannot compute it) and
-- are still found the old way, in an index of only those: it empties as
-- they are decided or expire.
create index approvals_pending_undigested on approvals (requested_by, skill, tool, skill_hash, mode, created_at, id)
    where status = 'pending' and call_digest is null;
