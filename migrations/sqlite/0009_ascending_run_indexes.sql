-- the run log's listing indexes in ascending order. sqlite reads an index
-- backwards as fast as forwards, so `order by created_at desc, id desc`
-- still needs no sort; but a new run, the newest, lands at the end of an
-- ascending index, where sqlite appends to the last leaf, instead of at the
-- start of a descending one, where leaves split half full. that was about
-- two pages per index in the wal for every call instead of one.
drop index runs_created;
drop index runs_tool_created;
drop index runs_skill_created;
drop index runs_status_created;
create index runs_created on runs (created_at, id);
create index runs_tool_created on runs (tool, created_at, id);
create index runs_skill_created on runs (skill, created_at, id);
create index runs_status_created on runs (status, created_at, id);
