-- webhook deliveries of [[notify]]: one row per event and target (the
-- unique key makes recording an event twice a no-op), claimed by one
-- instance at a time with a lease, retried until delivered or failed.
create table notifications (
    id text primary key not null,
    event text not null,
    approval_id text not null,
    target text not null,
    payload text not null check (json_valid(payload)),
    status text not null check (status in ('pending', 'delivered', 'failed')),
    attempts integer not null default 0,
    last_status integer,
    last_error text,
    created_at text not null,
    next_attempt_at text not null,
    delivered_at text,
    claimed_by text,
    claimed_until text,
    unique (event, approval_id, target)
) strict;

-- the sender's scan: due pending deliveries.
create index notifications_due on notifications (next_attempt_at) where status = 'pending';
-- GET /notifications, newest first, by status.
create index notifications_status_created on notifications (status, created_at desc, id desc);
