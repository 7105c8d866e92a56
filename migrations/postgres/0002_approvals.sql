-- approval requests, standing grants, the caller's mode on each run (so that
-- an approved run is prepared again exactly as it was asked for), and a
-- notification on every change of a run's status, which wakes callers
-- waiting on any instance (LISTEN skilld_runs; the payload is the run id).
alter table runs add column mode text;

create table approvals (
    id uuid primary key,
    run_id uuid not null references runs (id),
    skill text not null,
    tool text not null,
    description text not null,
    trust text not null,
    warning text,
    arguments jsonb not null,
    argv jsonb not null check (jsonb_typeof(argv) = 'array'),
    cwd text not null,
    skill_hash text not null,
    status text not null check (status in ('pending', 'approved', 'denied', 'expired')),
    scope text check (scope is null or scope in ('once', 'always')),
    requested_by text,
    decided_by text,
    note text,
    created_at timestamptz not null,
    decided_at timestamptz,
    expires_at timestamptz not null
);

create index approvals_status_created on approvals (status, created_at, id);
create index approvals_pending_expiry on approvals (expires_at) where status = 'pending';
create index approvals_skill_hash on approvals (skill, skill_hash) where status = 'approved';
create index approvals_run on approvals (run_id);

create table grants (
    id uuid primary key,
    skill text not null,
    tool text not null,
    skill_hash text not null,
    decision text not null check (decision in ('allow', 'deny')),
    created_by text,
    created_at timestamptz not null,
    unique (skill, tool, skill_hash)
);

create function skilld_notify_run() returns trigger language plpgsql as $$
begin
    perform pg_notify('skilld_runs', new.id::text);
    return new;
end
$$;

create trigger runs_status_notify
    after insert or update of status on runs
    for each row execute function skilld_notify_run();

-- a run that ends while its request is pending (cancelled, expired,
-- interrupted) withdraws the request in the same statement.
create function skilld_withdraw_request() returns trigger language plpgsql as $$
begin
    update approvals set status = 'expired', decided_at = new.finished_at
        where id = new.approval_id and status = 'pending';
    return new;
end
$$;

create trigger runs_withdraw_request
    after update of status on runs
    for each row
    when (new.approval_id is not null and new.status not in ('pending_approval', 'queued', 'running'))
    execute function skilld_withdraw_request();
