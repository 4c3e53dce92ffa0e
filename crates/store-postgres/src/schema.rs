// @generated automatically by Diesel CLI.

diesel::table! {
    api_keys (prefix) {
        prefix -> Text,
        key_hash -> Bytea,
        user_id -> Uuid,
        created_at -> Timestamptz,
        revoked_at -> Nullable<Timestamptz>,
        name -> Nullable<Text>,
        models -> Nullable<Array<Nullable<Text>>>,
        budget_credits -> Nullable<Int8>,
        budget_period -> Nullable<Text>,
        expires_at -> Nullable<Timestamptz>,
        rate_limit_per_minute -> Nullable<Int4>,
        max_concurrent_jobs -> Nullable<Int4>,
        last_used_at -> Nullable<Timestamptz>,
        budget_period_start -> Nullable<Timestamptz>,
        budget_used -> Int8,
        parent -> Nullable<Text>,
        has_children -> Bool,
    }
}

diesel::table! {
    batches (id) {
        id -> Uuid,
        user_id -> Uuid,
        key_prefix -> Nullable<Text>,
        created_at -> Timestamptz,
        expires_at -> Timestamptz,
        webhook_url -> Nullable<Text>,
        metadata -> Jsonb,
        ended -> Nullable<Text>,
        ended_at -> Nullable<Timestamptz>,
        unfinished -> Int4,
    }
}

diesel::table! {
    client_webhook_events (id) {
        job_id -> Nullable<Uuid>,
        user_id -> Uuid,
        final_state -> Text,
        url -> Text,
        occurred_at -> Timestamptz,
        body -> Nullable<Bytea>,
        attempts -> Jsonb,
        delivered_at -> Nullable<Timestamptz>,
        next_attempt_at -> Nullable<Timestamptz>,
        lease_until -> Nullable<Timestamptz>,
        host -> Text,
        batch_id -> Nullable<Uuid>,
        id -> Uuid,
    }
}

diesel::table! {
    idempotency_keys (user_id, key) {
        user_id -> Uuid,
        key -> Text,
        fingerprint -> Text,
        job_id -> Uuid,
        created_at -> Timestamptz,
    }
}

diesel::table! {
    job_leases (id) {
        id -> Uuid,
        lives_until -> Timestamptz,
    }
}

diesel::table! {
    jobs (id) {
        id -> Uuid,
        user_id -> Uuid,
        model -> Text,
        modality -> Text,
        state -> Text,
        progress -> Int2,
        outputs -> Nullable<Jsonb>,
        error -> Nullable<Jsonb>,
        created_at -> Timestamptz,
        started_at -> Nullable<Timestamptz>,
        finished_at -> Nullable<Timestamptz>,
        canceled_at -> Nullable<Timestamptz>,
        credits_held -> Int8,
        credits_actual -> Nullable<Int8>,
        input -> Jsonb,
        upstream -> Nullable<Jsonb>,
        submit_attempted -> Bool,
        next_poll_at -> Nullable<Timestamptz>,
        poll_failures -> Int4,
        version -> Int8,
        upstream_key -> Nullable<Text>,
        queue_position -> Nullable<Int4>,
        webhook_url -> Nullable<Text>,
        rate_per -> Text,
        rate_credits -> Int8,
        lease_id -> Nullable<Uuid>,
        slot_provider -> Nullable<Text>,
        slot_key -> Nullable<Text>,
        waiting_for_capacity -> Bool,
        sent_at -> Nullable<Timestamptz>,
        priority -> Text,
        key_prefix -> Nullable<Text>,
        rate_percent -> Int4,
        request -> Nullable<Jsonb>,
        trace_parent -> Nullable<Text>,
        start_by -> Nullable<Timestamptz>,
        budget_period_start -> Nullable<Timestamptz>,
        billing -> Nullable<Jsonb>,
        provider_units -> Nullable<Int8>,
        units_charged -> Nullable<Int8>,
        provider_cost -> Nullable<Int8>,
        routing -> Nullable<Jsonb>,
        moderation -> Nullable<Text>,
        batch_id -> Nullable<Uuid>,
        batch_custom_id -> Nullable<Text>,
        batch_admitted -> Bool,
        rate_batch_percent -> Int4,
    }
}

diesel::table! {
    kept_secrets (name) {
        name -> Text,
        value -> Bytea,
        updated_at -> Timestamptz,
    }
}

diesel::table! {
    key_purged_charges (key_prefix, day) {
        key_prefix -> Text,
        day -> Date,
        credits -> Int8,
    }
}

diesel::table! {
    ledger (id) {
        id -> Int8,
        user_id -> Uuid,
        job_id -> Nullable<Uuid>,
        kind -> Text,
        amount -> Int8,
        released -> Int8,
        created_at -> Timestamptz,
    }
}

diesel::table! {
    models (id) {
        id -> Text,
        position -> Int8,
        document -> Jsonb,
        version -> Int8,
        updated_at -> Timestamptz,
        deleted_at -> Nullable<Timestamptz>,
    }
}

diesel::table! {
    openai_batches (id) {
        id -> Uuid,
        user_id -> Uuid,
        key_prefix -> Nullable<Text>,
        input_file_id -> Uuid,
        endpoint -> Text,
        completion_window -> Text,
        created_at -> Timestamptz,
        metadata -> Jsonb,
        errors -> Jsonb,
    }
}

diesel::table! {
    openai_files (id) {
        id -> Uuid,
        user_id -> Uuid,
        key_prefix -> Nullable<Text>,
        filename -> Text,
        bytes -> Int8,
        created_at -> Timestamptz,
        content -> Bytea,
    }
}

diesel::table! {
    rate_limits (user_id) {
        user_id -> Uuid,
        tokens -> Float8,
        refilled_at -> Timestamptz,
        taken -> Int4,
    }
}

diesel::table! {
    removed_jobs (job_id) {
        job_id -> Uuid,
        removed_at -> Timestamptz,
    }
}

diesel::table! {
    upload_days (user_id, day) {
        user_id -> Uuid,
        day -> Date,
        bytes -> Int8,
    }
}

diesel::table! {
    uploads (sha256) {
        sha256 -> Text,
        size -> Int8,
        keep_until -> Timestamptz,
        bytes -> Nullable<Bytea>,
    }
}

diesel::table! {
    usage_key_rollup (day, user_id, provider, provider_key) {
        day -> Date,
        user_id -> Uuid,
        provider -> Text,
        provider_key -> Text,
        jobs -> Int8,
        succeeded -> Int8,
        failed -> Int8,
        canceled -> Int8,
        credits_spent -> Int8,
        billed -> Int8,
        provider_units -> Int8,
        provider_cost -> Int8,
        content_refused -> Int8,
    }
}

diesel::table! {
    usage_rollup (day, user_id, model, provider, key_prefix) {
        day -> Date,
        user_id -> Uuid,
        model -> Text,
        jobs -> Int8,
        succeeded -> Int8,
        failed -> Int8,
        canceled -> Int8,
        credits_spent -> Int8,
        provider -> Text,
        key_prefix -> Text,
        billed -> Int8,
        provider_units -> Int8,
        provider_cost -> Int8,
        content_refused -> Int8,
    }
}

diesel::table! {
    usage_sealed (singleton) {
        singleton -> Bool,
        sealed_before -> Nullable<Timestamptz>,
    }
}

diesel::table! {
    users (id) {
        id -> Uuid,
        name -> Text,
        credits_available -> Int8,
        credits_held -> Int8,
        credits_spent -> Int8,
        credits_granted -> Int8,
        rate_limit_per_minute -> Int4,
        max_concurrent_jobs -> Int4,
        active_jobs -> Int4,
        created_at -> Timestamptz,
        price_percent -> Int4,
        admitted_batch_items -> Int4,
    }
}

diesel::table! {
    webhook_secrets (user_id) {
        user_id -> Uuid,
        sealed -> Bytea,
        updated_at -> Timestamptz,
    }
}

diesel::joinable!(api_keys -> users (user_id));
diesel::joinable!(batches -> users (user_id));
diesel::joinable!(client_webhook_events -> batches (batch_id));
diesel::joinable!(client_webhook_events -> jobs (job_id));
diesel::joinable!(client_webhook_events -> users (user_id));
diesel::joinable!(idempotency_keys -> jobs (job_id));
diesel::joinable!(idempotency_keys -> users (user_id));
diesel::joinable!(jobs -> users (user_id));
diesel::joinable!(ledger -> users (user_id));
diesel::joinable!(openai_batches -> openai_files (input_file_id));
diesel::joinable!(openai_batches -> users (user_id));
diesel::joinable!(openai_files -> users (user_id));
diesel::joinable!(removed_jobs -> jobs (job_id));
diesel::joinable!(usage_key_rollup -> users (user_id));
diesel::joinable!(usage_rollup -> users (user_id));
diesel::joinable!(webhook_secrets -> users (user_id));

diesel::allow_tables_to_appear_in_same_query!(
    api_keys,
    batches,
    client_webhook_events,
    idempotency_keys,
    job_leases,
    jobs,
    kept_secrets,
    key_purged_charges,
    ledger,
    models,
    openai_batches,
    openai_files,
    rate_limits,
    removed_jobs,
    upload_days,
    uploads,
    usage_key_rollup,
    usage_rollup,
    usage_sealed,
    users,
    webhook_secrets,
);
