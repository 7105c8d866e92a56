-- the permissions the skill declares (seed 002's strings), shown to the
-- approver with the request. requests made before this keep an empty list.
alter table approvals add column permissions jsonb not null default '[]'
    check (jsonb_typeof(permissions) = 'array');
