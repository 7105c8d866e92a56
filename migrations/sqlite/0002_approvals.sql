-- approval requests, standing grants, and the caller's mode on each run
-- (so that an approved run is prepared again exactly as it was asked for).
-- timestamps and ids follow 0001: fixed-width utc text, lowercase uuid text.
alter table runs add column mode text;

create table approvals (
    id text primary key not null,
    run_id text not null references runs (id),
    skill text not null,
    tool text not null,
    description text not null,
    trust text not null,
    warning text,
    arguments text not null check (json_valid(arguments)),
    argv text not null check (json_valid(argv) and json_type(argv) = 'array'),
    cwd text not null,
    skill_hash text not null,
    status text not null check (status in ('pending', 'approved', 'denied', 'expired')),
    scope text check (scope is null or scope in ('once', 'always')),
    requested_by text,
    decided_by text,
    note text,
    created_at text not null,
    decided_at text,
    expires_at text not null
) strict;

-- the inbox lists by status, oldest first; expiry scans the pending ones.
create index approvals_status_created on approvals (status, created_at, id);
create index approvals_pending_expiry on approvals (expires_at) where status = 'pending';
-- first-run approval: was this skill version ever approved?
create index approvals_skill_hash on approvals (skill, skill_hash) where status = 'approved';
create index approvals_run on approvals (run_id);

create table grants (
    id text primary key not null,
    skill text not null,
    tool text not null,
    skill_hash text not null,
    decision text not null check (decision in ('allow', 'deny')),
    created_by text,
    created_at text not null,
    unique (skill, tool, skill_hash)
) strict;

-- a run that ends while its request is pending (cancelled, expired,
-- interrupted) withdraws the request in the same statement.
create trigger runs_withdraw_request after update of status on runs
    when new.approval_id is not null
        and new.status not in ('pending_approval', 'queued', 'running')
begin
    update approvals set status = 'expired', decided_at = new.finished_at
        where id = new.approval_id and status = 'pending';
end;
