use super::*;

fn draft(prompt: &str) -> GenerationDraft {
    GenerationDraft { prompt: Some(prompt.to_owned()), ..GenerationDraft::default() }
}

fn validate(endpoint: Modality, draft: GenerationDraft) -> Result<GenerationRequest, InvalidRequest> {
    GenerationRequest::validate(endpoint, draft, &Catalog::builtin().unwrap())
}

fn refused_param(endpoint: Modality, draft: GenerationDraft) -> String {
    validate(endpoint, draft).unwrap_err().param.unwrap_or_default()
}

fn exact(n: u64) -> Option<WholeNumber> {
    Some(WholeNumber::Exact(n))
}

#[test]
fn video_defaults_follow_the_spec() {
    let request = validate(Modality::Video, draft("  a cat  ")).unwrap();
    assert_eq!(request.model.as_str(), "seedance-2.0-fast");
    assert_eq!(request.input.prompt, "a cat");
    assert_eq!(request.input.aspect_ratio, "16:9");
    assert_eq!(request.input.resolution.as_deref(), Some("1080p"));
    assert_eq!(request.input.duration_sec, Some(5));
    assert_eq!(request.input.n, None);
}

#[test]
fn image_defaults_follow_the_spec() {
    let request = validate(Modality::Image, draft("a cat")).unwrap();
    assert_eq!(request.model.as_str(), "nano-banana");
    assert_eq!(request.input.aspect_ratio, "1:1");
    assert_eq!(request.input.n, Some(1));
    assert_eq!(request.input.resolution, None);
}

#[test]
fn every_limit_names_its_param() {
    let d = || draft("a");
    let model = |m: &str| GenerationDraft { model: Some(m.into()), ..d() };
    let long_url = format!("https://a/{}", "x".repeat(2048));
    let huge_extra: Map<String, Value> =
        [("k".to_owned(), Value::from("x".repeat(MAX_EXTRA_BYTES)))].into_iter().collect();
    let cases = [
        (Modality::Video, GenerationDraft::default(), "prompt"),
        (Modality::Video, draft("   "), "prompt"),
        (Modality::Video, draft(&"x".repeat(MAX_PROMPT_CHARS + 1)), "prompt"),
        (Modality::Video, GenerationDraft { negative_prompt: Some("x".repeat(2001)), ..d() }, "negative_prompt"),
        (Modality::Video, model("nope"), "model"),
        (Modality::Video, model("flux-pro"), "model"),
        (Modality::Image, model("seedance-2.0-fast"), "model"),
        (Modality::Video, GenerationDraft { aspect_ratio: Some("4:3".into()), ..d() }, "aspect_ratio"),
        (Modality::Image, GenerationDraft { aspect_ratio: Some("21:9".into()), ..d() }, "aspect_ratio"),
        (Modality::Video, GenerationDraft { resolution: Some("4k".into()), ..d() }, "resolution"),
        (
            Modality::Video,
            GenerationDraft { resolution: Some("720p".into()), ..model("kling-2.1-master") },
            "resolution",
        ),
        (Modality::Video, GenerationDraft { duration_sec: exact(3), ..d() }, "duration_sec"),
        (Modality::Video, GenerationDraft { duration_sec: exact(16), ..d() }, "duration_sec"),
        (Modality::Video, GenerationDraft { duration_sec: Some(WholeNumber::Other), ..d() }, "duration_sec"),
        (Modality::Video, GenerationDraft { duration_sec: Some(WholeNumber::Text("5".into())), ..d() }, "duration_sec"),
        (Modality::Video, GenerationDraft { duration_sec: exact(7), ..model("kling-2.1-master") }, "duration_sec"),
        (Modality::Video, GenerationDraft { seed: Some(WholeNumber::Text("5".into())), ..d() }, "seed"),
        (Modality::Image, GenerationDraft { duration_sec: exact(5), ..d() }, "duration_sec"),
        (Modality::Image, GenerationDraft { n: exact(0), ..d() }, "n"),
        (Modality::Image, GenerationDraft { n: exact(5), ..d() }, "n"),
        (Modality::Video, GenerationDraft { n: exact(2), ..d() }, "n"),
        (Modality::Video, GenerationDraft { seed: Some(WholeNumber::Other), ..d() }, "seed"),
        (Modality::Video, GenerationDraft { seed: exact(4_294_967_296), ..d() }, "seed"),
        (Modality::Video, GenerationDraft { image_inputs: Some(vec!["ftp://a/b.png".into()]), ..d() }, "image_inputs"),
        (Modality::Video, GenerationDraft { image_inputs: Some(vec!["https://".into()]), ..d() }, "image_inputs"),
        (Modality::Video, GenerationDraft { image_inputs: Some(vec![long_url]), ..d() }, "image_inputs"),
        (
            Modality::Video,
            GenerationDraft { image_inputs: Some(vec!["https://a/b.png".into(); 11]), ..d() },
            "image_inputs",
        ),
        (Modality::Video, GenerationDraft { extra: Some(huge_extra), ..d() }, "extra"),
    ];
    for (endpoint, draft, param) in cases {
        assert_eq!(refused_param(endpoint, draft.clone()), param, "{draft:?}");
    }
}

#[test]
fn a_select_duration_takes_its_options_as_numbers_or_text() {
    let kling = |d: WholeNumber| GenerationDraft {
        model: Some("kling-2.1-master".into()),
        duration_sec: Some(d),
        ..draft("a")
    };
    for given in [WholeNumber::Exact(10), WholeNumber::Text("10".into())] {
        assert_eq!(validate(Modality::Video, kling(given)).unwrap().input.duration_sec, Some(10));
    }
    assert!(validate(Modality::Video, kling(WholeNumber::Text("7".into()))).is_err());
}

#[test]
fn boundary_values_are_accepted() {
    let ok = [
        (
            Modality::Video,
            GenerationDraft {
                duration_sec: exact(15),
                seed: exact(4_294_967_295),
                ..draft(&"x".repeat(MAX_PROMPT_CHARS))
            },
        ),
        (
            Modality::Video,
            GenerationDraft { duration_sec: exact(4), seed: exact(0), resolution: Some("720p".into()), ..draft("a") },
        ),
        (
            Modality::Image,
            GenerationDraft {
                n: exact(4),
                aspect_ratio: Some("3:4".into()),
                image_inputs: Some(vec!["http://a/b.png".into(); 10]),
                ..draft("a")
            },
        ),
    ];
    for (endpoint, draft) in ok {
        assert!(validate(endpoint, draft.clone()).is_ok(), "{draft:?}");
    }
}

#[test]
fn uploaded_images_replace_the_urls_within_their_bounds() {
    let request = validate(Modality::Image, draft("edit this")).unwrap();
    let png = "https://gen.example/api/v1/uploads/ab.png?expires=1&sig=00".to_owned();
    let edited = request.clone().with_uploaded_images(vec![png.clone(); MAX_UPLOADED_IMAGES]).unwrap();
    assert_eq!(edited.input.image_inputs.len(), MAX_UPLOADED_IMAGES);
    for refused in [
        vec![],
        vec![png.clone(); MAX_UPLOADED_IMAGES + 1],
        vec!["data:image/png;base64,iVBORw0KGgo=".into()],
        vec!["ftp://a/b.png".into()],
    ] {
        let error = request.clone().with_uploaded_images(refused.clone()).unwrap_err();
        assert_eq!(error.param.as_deref(), Some("image"), "{refused:?}");
    }
}
