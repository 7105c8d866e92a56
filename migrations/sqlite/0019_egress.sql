-- issue 42's held destinations: a networked run (or a long-lived child)
-- asked for a host and port its skill's list does not cover, and waits
-- for a person. kept here so that any instance lists and decides it.
-- no foreign key to runs: retention deletes runs, the decisions stay.
create table egress_requests (
    id text primary key not null,
    run_id text,
    skill text not null,
    skill_version text,
    skill_hash text not null,
    tool text,
    requested_by text,
    host text not null,
    port integer not null check (port between 0 and 65535),
    status text not null check (status in ('pending', 'approved', 'denied', 'expired')),
    scope text check (scope in ('once', 'always')),
    decided_by text,
    note text,
    created_at text not null,
    expires_at text not null,
    decided_at text
);
-- the pending list, oldest first.
create index egress_requests_status_created on egress_requests (status, created_at, id);

-- an "allow always": skill version `skill_hash` may reach host:port from
-- now on. the first decision stays; a later one for the same destination
-- adds nothing.
create table egress_grants (
    skill text not null,
    skill_hash text not null,
    host text not null,
    port integer not null check (port between 0 and 65535),
    decided_by text,
    note text,
    created_at text not null,
    request_id text not null,
    primary key (skill, skill_hash, host, port)
);
-- a skill's grants, newest first.
create index egress_grants_skill_created on egress_grants (skill, created_at);
