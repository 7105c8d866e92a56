-- seed 002's registry cache: each registry's index as last fetched, read
-- again while it is younger than the ttl (default 1 h), and when the
-- registry cannot be reached.
create table registry_cache (
    url text primary key,
    body text not null,
    fetched_at timestamptz not null
);
