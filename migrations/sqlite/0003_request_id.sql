-- the x-request-id of the http request that made each run, so a run and the
-- log lines of its request can be found from each other.
alter table runs add column request_id text;
