//! # genjobs-store-contract
//!
//! The contract every store adapter must pass, written once. An adapter's test module calls
//! [`store_contract_tests!`] with an expression that builds a fresh, empty store and a guard that
//! lives as long as the test (a database to drop afterwards, say); the macro expands to one
//! `#[tokio::test]` per case, so a failure names the rule that broke. After every case, the
//! ledger of every user the case made must sum to its account.
//!
//! ```text
//! genjobs_store_contract::store_contract_tests!(async { (Arc::new(MemoryStore::new()), ()) });
//! ```

#![allow(clippy::unwrap_used, reason = "a test suite: a failed unwrap is a failed test")]

pub mod cases;

/// Expands to one test per contract case for the store built by `$make`: an async expression
/// giving an `Arc` of a type implementing both `JobStore` and `AccountStore`, and a guard kept
/// alive until the case ends.
#[macro_export]
macro_rules! store_contract_tests {
    ($make:expr) => {
        $crate::store_contract_tests!(@cases $make;
            accept_holds_credits_and_counts_the_job,
            accept_checks_credits_before_concurrency,
            accept_refuses_beyond_the_concurrency_limit,
            accept_refuses_an_unknown_user,
            idempotent_retry_replays_without_holding,
            idempotency_key_with_another_body_conflicts,
            idempotency_keys_are_per_user,
            commit_applies_only_on_the_expected_version,
            success_settles_and_frees_a_slot,
            failure_and_cancel_release_everything,
            commit_of_a_missing_job_says_so,
            claim_returns_due_jobs_once_until_the_lease_ends,
            claim_skips_final_and_future_jobs,
            a_renewed_lease_keeps_its_jobs_and_one_that_ran_out_never_lives_again,
            an_ended_lease_makes_its_jobs_claimable_at_once,
            an_accept_with_a_lease_is_the_accepting_drivers_until_it_runs_out,
            unfinished_jobs_are_counted_by_state,
            jobs_are_listed_newest_first_in_pages,
            jobs_are_found_by_every_filter_newest_first,
            jobs_are_found_by_the_key_they_were_submitted_with,
            a_job_keeps_its_request_and_trace_and_reads_its_own_ledger,
            removed_jobs_leave_the_kept_pages_and_keep_their_credits,
            keys_are_found_by_prefix_and_revoked_at_once,
            key_prefixes_are_unique,
            key_settings_are_kept_listed_and_changed,
            a_keys_jobs_count_against_its_budget,
            a_keys_used_follows_its_jobs_across_periods_and_changes,
            a_keys_concurrency_limit_counts_its_own_jobs,
            concurrent_accepts_never_pass_a_keys_budget,
            a_child_keys_credentials_are_narrowed_by_its_ancestors,
            revoking_a_key_revokes_its_subtree,
            a_subtrees_jobs_count_against_every_ancestors_budget_and_limit,
            concurrent_accepts_of_children_never_pass_their_parents_budget,
            a_subtrees_jobs_ledger_and_usage_are_found_by_its_keys,
            grants_move_available_credits_only,
            a_users_limits_and_tier_change_with_its_credentials,
            a_jobs_tier_is_kept_with_it,
            users_are_listed_newest_first_by_name_or_key_prefix,
            concurrent_accepts_and_finishes_keep_every_invariant,
            concurrent_accepts_of_many_users_hold_each_users_own_credits,
            jobs_are_found_by_their_upstream_key,
            output_copies_are_kept_as_committed,
            a_jobs_bill_is_kept_with_its_final_transition,
            usage_and_reconciliation_sum_the_bills_before_and_after_sealing,
            purged_jobs_keep_their_bills_in_every_report,
            purging_final_jobs_keeps_the_ledger_and_usage,
            purging_a_keys_jobs_keeps_its_budget_used,
            usage_groups_jobs_by_the_provider_that_took_them,
            usage_groups_jobs_by_the_key_that_submitted_them,
            a_sealed_hour_reads_the_same_and_counts_its_purged_jobs_once,
            the_hours_of_a_day_are_sealed_up_to_its_first_job_running,
            a_final_commit_records_one_webhook_event,
            webhook_events_are_claimed_once_until_their_lease_ends,
            a_claim_leaves_hosts_at_their_limit_alone,
            webhook_attempts_are_recorded_and_a_delivery_ends_them,
            a_redelivered_webhook_event_is_due_again,
            webhook_secrets_are_made_once_and_replaced_on_rotation,
            models_are_put_and_read_back,
            every_catalog_change_takes_a_higher_version,
            a_deleted_model_is_a_tombstone_until_put_again,
            catalog_changes_apply_together,
            the_initial_catalog_fills_only_a_store_that_never_held_a_model,
            a_kept_secret_is_made_once_and_replaced_only_when_asked,
            slots_go_to_the_least_busy_key_up_to_its_cap,
            concurrent_takes_never_pass_a_cap,
            a_jobs_place_names_its_provider,
            the_next_in_line_are_those_the_free_slots_go_to,
            a_start_deadline_is_kept_and_makes_the_job_due_by_then,
            a_jobs_routing_preference_is_kept_with_it,
            an_upload_is_kept_once_per_content_within_the_days_quota,
            concurrent_uploads_never_pass_the_days_quota,
            expired_uploads_are_removed_unless_a_job_not_yet_final_names_them,
            a_batch_holds_the_sum_with_a_hold_per_item_and_no_active_job,
            a_batch_beyond_the_credits_or_a_keys_budget_is_refused_whole,
            an_idempotent_batch_retry_replays_it_and_another_body_conflicts,
            a_batchs_figures_and_state_follow_its_items,
            an_item_is_admitted_only_under_its_owners_limit,
            a_keys_concurrency_limit_counts_no_batch_item,
            a_batchs_items_are_paged_in_order_by_state,
            the_first_end_stays_and_closed_windows_are_found,
            batches_are_listed_newest_first_by_owner_and_state,
            a_wake_makes_each_owners_first_items_within_its_room_due,
            a_wake_older_than_a_claim_leaves_the_item_with_its_driver,
            a_batch_file_is_kept_with_its_content,
            openai_batches_are_kept_replaced_and_listed_newest_first,
            the_last_items_final_commit_records_the_batchs_one_event,
            racing_last_items_record_one_batch_event,
            a_canceled_or_expired_batchs_event_says_how_it_ended,
        );
    };
    (@cases $make:expr; $($case:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                let (store, guard) = $make.await;
                $crate::cases::$case(store.clone()).await;
                $crate::cases::ledgers_match_accounts(&*store).await;
                drop(guard);
            }
        )*
    };
}
