-- seed 002's sessions: one per conversation of an orchestrator, holding
-- the trigger context it started with and each skill's state in it. the
-- store reads context and state as opaque json. `revision` grows with
-- every update, so two instances updating one session cannot both win.
create table sessions (
    id uuid primary key,
    caller text,
    context jsonb not null,
    turn bigint not null default 0 check (turn >= 0),
    state jsonb not null,
    revision bigint not null default 0,
    created_at timestamptz not null,
    updated_at timestamptz not null,
    expires_at timestamptz not null
);
-- a caller's live sessions are counted at each create.
create index sessions_caller_expires on sessions (caller, expires_at);
-- the expiry sweep.
create index sessions_expires on sessions (expires_at);

-- a person's "allow always" for the permissions a skill version declares,
-- asked at the skill's first activation in a session.
create table skill_approvals (
    skill text not null,
    skill_hash text not null,
    permissions jsonb not null,
    decided_by text,
    decided_at timestamptz not null,
    primary key (skill, skill_hash)
);

-- the session a run was called in, if any. no foreign key: a session ends
-- and is deleted, its runs stay in the log.
alter table runs add column session_id uuid;
create index runs_session_created on runs (session_id, created_at desc, id desc) where session_id is not null;
