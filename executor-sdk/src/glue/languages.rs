//! The script languages an executor can run, and the name a run goes by in spans and logs.
//! Apart from the rest of `glue` because telemetry names runs by it, and telemetry sits below
//! the handlers that run scripts.

use xjob_proto::pb;

/// One script language: how its scripts are stored and started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Language {
    pub(crate) glue_type: pb::GlueType,
    /// Program used when the executor does not name one.
    pub(crate) default_interpreter: &'static str,
    /// File extension of the script (PowerShell refuses to run a file without `.ps1`).
    pub(crate) extension: &'static str,
    /// Arguments between the interpreter and the script path.
    pub(crate) leading_args: &'static [&'static str],
}

/// The script languages, XXL-JOB's set minus GROOVY.
pub(crate) const LANGUAGES: [Language; 5] = [
    Language {
        glue_type: pb::GlueType::Shell,
        default_interpreter: "bash",
        extension: "sh",
        leading_args: &[],
    },
    Language {
        glue_type: pb::GlueType::Python,
        default_interpreter: "python3",
        extension: "py",
        leading_args: &[],
    },
    Language {
        glue_type: pb::GlueType::Nodejs,
        default_interpreter: "node",
        extension: "js",
        leading_args: &[],
    },
    Language {
        glue_type: pb::GlueType::Php,
        default_interpreter: "php",
        extension: "php",
        leading_args: &[],
    },
    Language {
        glue_type: pb::GlueType::Powershell,
        default_interpreter: "pwsh",
        extension: "ps1",
        leading_args: &["-NoLogo", "-NoProfile", "-NonInteractive", "-File"],
    },
];

/// Returns the language of a script glue type; `None` for BEAN, GROOVY and unknown values.
pub(crate) fn language_of(glue_type: pb::GlueType) -> Option<Language> {
    LANGUAGES
        .into_iter()
        .find(|language| language.glue_type == glue_type)
}

/// What a run calls, as its spans and log name it: the BEAN handler's name, or for a script
/// (whose `handler` is empty) `glue:` and its language's interpreter (`glue:bash`).
pub(crate) fn run_handler_name(request: &pb::RunRequest) -> String {
    let glue_type = pb::GlueType::try_from(request.glue_type).unwrap_or(pb::GlueType::Unspecified);
    match language_of(glue_type) {
        Some(language) => format!("glue:{}", language.default_interpreter),
        None if glue_type == pb::GlueType::Groovy => "glue:groovy".to_owned(),
        None => request.handler.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_script_type_has_a_language_and_bean_has_none() {
        for glue_type in [
            pb::GlueType::Shell,
            pb::GlueType::Python,
            pb::GlueType::Nodejs,
            pb::GlueType::Php,
            pb::GlueType::Powershell,
        ] {
            assert!(language_of(glue_type).is_some(), "{glue_type:?}");
        }
        assert!(language_of(pb::GlueType::Bean).is_none());
        assert!(language_of(pb::GlueType::Groovy).is_none());
    }
}
