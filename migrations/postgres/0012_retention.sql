-- retention (docs/design.md §5) deletes old final runs with their approval
-- requests and those requests' webhook deliveries.
--
-- first-run approval asks "was this skill version ever approved?". that
-- answer must outlive the request that gave it, or a version approved long
-- ago would be held again once its request is pruned: pruning an approved
-- request records its skill version here first.
create table approved_versions (
    skill text not null,
    skill_hash text not null,
    primary key (skill, skill_hash)
);

-- pruning finds the deliveries of the requests it removes.
create index notifications_approval on notifications (approval_id);
