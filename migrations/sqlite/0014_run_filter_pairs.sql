-- a listing filtered on a tool (or skill) and a status read the status
-- index and checked the tool row by row: at 10 million runs, 0.7 s for a
-- pair that matches nothing. one index per pair answers it from a range
-- (ascending, as 0009 explains, and read backwards).
create index runs_tool_status_created on runs (tool, status, created_at, id);
create index runs_skill_status_created on runs (skill, status, created_at, id);
