//! The rule that lets a failed submission go to the next provider, case by case: it protects
//! credits, since a job sent to two providers may run, and be charged, twice.

use genjobs_domain::ports::{SubmitCall, SubmitFailure};

#[test]
fn only_a_call_that_provably_queued_nothing_may_go_to_the_next_provider() {
    let cases = [
        (SubmitCall::NotConnected, true),
        (SubmitCall::Answered(429), true),
        (SubmitCall::Answered(502), true),
        (SubmitCall::Answered(503), true),
        (SubmitCall::TimedOut, false),
        (SubmitCall::Broken, false),
        (SubmitCall::Answered(500), false),
        (SubmitCall::Answered(504), false),
        (SubmitCall::Answered(400), false),
        (SubmitCall::Answered(401), false),
        (SubmitCall::Answered(403), false),
        (SubmitCall::Answered(422), false),
    ];
    for (call, reached) in cases {
        assert_eq!(call.never_reached(), reached, "{call:?}");
    }
}

#[test]
fn a_call_without_an_answer_is_named_by_what_the_transport_saw() {
    assert_eq!(SubmitCall::unanswered_by(true, true), SubmitCall::NotConnected, "a connect timeout sent nothing");
    assert_eq!(SubmitCall::unanswered_by(false, true), SubmitCall::TimedOut);
    assert_eq!(SubmitCall::unanswered_by(false, false), SubmitCall::Broken);
    assert!(matches!(SubmitCall::NotConnected.unanswered(), SubmitFailure::NotReached(_)));
    assert!(matches!(SubmitCall::TimedOut.unanswered(), SubmitFailure::Ambiguous(_)));
}
