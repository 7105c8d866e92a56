-- the audit log: one row per call, from the moment it is decided to its envelope.
-- no foreign key to approvals: that table arrives in a later migration.
create table runs (
    id uuid primary key,
    skill text not null,
    tool text not null,
    skill_hash text not null,
    arguments jsonb not null,
    argv jsonb not null check (jsonb_typeof(argv) = 'array'),
    cwd text not null,
    status text not null check (status in (
        'pending_approval', 'queued', 'running', 'succeeded', 'failed',
        'timed_out', 'cancelled', 'denied', 'expired', 'interrupted'
    )),
    requested_by text,
    approval_id uuid,
    created_at timestamptz not null,
    started_at timestamptz,
    finished_at timestamptz,
    result jsonb,
    pgid integer,
    instance text
);

-- get /runs pages newest first, optionally filtered by one of tool, skill, status.
create index runs_created on runs (created_at desc, id desc);
create index runs_tool_created on runs (tool, created_at desc, id desc);
create index runs_skill_created on runs (skill, created_at desc, id desc);
create index runs_status_created on runs (status, created_at desc, id desc);
-- start-up recovery looks for the few runs still running, per instance.
create index runs_running on runs (instance) where status = 'running';
