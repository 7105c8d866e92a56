-- webhook deliveries of [[notify]]: one row per event and target (the
-- unique key makes recording an event twice a no-op, so every instance may
-- record what it sees), claimed by one instance at a time with a lease,
-- retried until delivered or failed.
create table notifications (
    id uuid primary key,
    event text not null,
    approval_id uuid not null,
    target text not null,
    payload jsonb not null,
    status text not null check (status in ('pending', 'delivered', 'failed')),
    attempts integer not null default 0,
    last_status integer,
    last_error text,
    created_at timestamptz not null,
    next_attempt_at timestamptz not null,
    delivered_at timestamptz,
    claimed_by text,
    claimed_until timestamptz,
    unique (event, approval_id, target)
);

-- the sender's scan: due pending deliveries.
create index notifications_due on notifications (next_attempt_at) where status = 'pending';
-- GET /notifications, newest first, by status.
create index notifications_status_created on notifications (status, created_at desc, id desc);
