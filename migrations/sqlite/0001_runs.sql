-- the audit log: one row per call, from the moment it is decided to its envelope.
--
-- timestamps are text in one fixed-width utc form ('2024-11-22T04:41:00.123456Z',
-- always six fractional digits) so that text order is time order: sqlx's own
-- encoding drops trailing zeros, and '...00Z' would sort after '...00.5Z'.
-- ids are lowercase hyphenated text, whose order is the uuid's byte order, as in
-- postgresql. json (arguments, argv, result) is text checked with json_valid.
create table runs (
    id text primary key not null,
    skill text not null,
    tool text not null,
    skill_hash text not null,
    arguments text not null check (json_valid(arguments)),
    argv text not null check (json_valid(argv) and json_type(argv) = 'array'),
    cwd text not null,
    status text not null check (status in (
        'pending_approval', 'queued', 'running', 'succeeded', 'failed',
        'timed_out', 'cancelled', 'denied', 'expired', 'interrupted'
    )),
    requested_by text,
    approval_id text,
    created_at text not null,
    started_at text,
    finished_at text,
    result text check (result is null or json_valid(result)),
    pgid integer,
    instance text
) strict;

-- get /runs pages newest first, optionally filtered by one of tool, skill, status.
create index runs_created on runs (created_at desc, id desc);
create index runs_tool_created on runs (tool, created_at desc, id desc);
create index runs_skill_created on runs (skill, created_at desc, id desc);
create index runs_status_created on runs (status, created_at desc, id desc);
-- start-up recovery looks for the few runs still running, per instance.
create index runs_running on runs (instance) where status = 'running';
