-- the permissions the skill declares (seed 002's strings), shown to the
-- approver with the request. requests made before this keep an empty list.
alter table approvals add column permissions text not null default '[]'
    check (json_valid(permissions) and json_type(permissions) = 'array');
