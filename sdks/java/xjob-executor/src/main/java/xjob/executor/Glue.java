package xjob.executor;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import xjob.v1.Common.GlueType;
import xjob.v1.Executor.RunRequest;

/**
 * Script (GLUE) jobs: the job carries its script, the executor runs it with an interpreter, as
 * the Rust SDK does (docs/executors.md, "Script (GLUE) jobs").
 *
 * <pre>
 * RunRequest{glue_type, glue_source, glue_updated_ms}
 *   ─▶ {logDir}/gluesource/{jobId}_{glueUpdatedMs}.{ext}   (written once per version)
 *   ─▶ command handler: [interpreter, leading args…, script, params split on whitespace]
 * </pre>
 *
 * <p>Off unless the executor enables a language: scripts are code sent over the network.
 */
final class Glue {
  static final String GROOVY_UNSUPPORTED =
      "GLUE_TYPE_GROOVY is not supported: it is Java source compiled inside XXL-JOB's JVM"
          + " executor, and xjob executors are not JVMs; use a BEAN handler or a script glue type"
          + " (shell, python, nodejs, php, powershell)";

  record Language(String interpreter, String extension, List<String> leading) {}

  static final Map<GlueType, Language> LANGUAGES = new EnumMap<>(GlueType.class);

  static {
    LANGUAGES.put(GlueType.GLUE_TYPE_SHELL, new Language("bash", "sh", List.of()));
    LANGUAGES.put(GlueType.GLUE_TYPE_PYTHON, new Language("python3", "py", List.of()));
    LANGUAGES.put(GlueType.GLUE_TYPE_NODEJS, new Language("node", "js", List.of()));
    LANGUAGES.put(GlueType.GLUE_TYPE_PHP, new Language("php", "php", List.of()));
    LANGUAGES.put(
        GlueType.GLUE_TYPE_POWERSHELL,
        new Language(
            "pwsh", "ps1", List.of("-NoLogo", "-NoProfile", "-NonInteractive", "-File")));
  }

  private Glue() {}

  /** One handler per enabled script type; scripts go under {logDir}/gluesource/. */
  static Map<GlueType, JobHandler> runners(
      Map<GlueType, String> interpreters, Map<String, String> env, Path logDir) {
    Map<GlueType, JobHandler> runners = new EnumMap<>(GlueType.class);
    Path scriptDir = logDir.resolve("gluesource");
    interpreters.forEach(
        (glueType, interpreter) -> {
          Language language = LANGUAGES.get(glueType);
          String program = interpreter == null ? language.interpreter() : interpreter;
          runners.put(glueType, context -> run(glueType, language, program, env, scriptDir, context));
        });
    return runners;
  }

  private static String run(
      GlueType glueType,
      Language language,
      String interpreter,
      Map<String, String> env,
      Path scriptDir,
      JobContext context)
      throws Exception {
    RunRequest request = context.request();
    Path script = scriptFile(language, scriptDir, request);
    context.log("glue " + glueType + " version " + request.getGlueUpdatedMs() + " from " + script);
    List<String> argv = new ArrayList<>();
    argv.add(interpreter);
    argv.addAll(language.leading());
    argv.add(script.toString());
    CommandHandler command = new CommandHandler(argv);
    env.forEach(command::env);
    return command.handle(context);
  }

  /**
   * The script of the run's job and version, written if this version is not stored yet (and then
   * the job's older versions deleted).
   */
  private static Path scriptFile(Language language, Path scriptDir, RunRequest request)
      throws JobFailure {
    String prefix = request.getJobId() + "_";
    String name = prefix + request.getGlueUpdatedMs() + "." + language.extension();
    Path path = scriptDir.resolve(name);
    if (Files.exists(path)) {
      return path;
    }
    try {
      Files.createDirectories(scriptDir);
      // Written aside then renamed: a half-written file is never taken for this version.
      Path partial = scriptDir.resolve(name + "." + request.getLogId() + ".partial");
      Files.writeString(partial, request.getGlueSource(), StandardCharsets.UTF_8);
      Files.move(partial, path, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
    } catch (IOException e) {
      throw new JobFailure("failed to write the glue script " + path + ": " + e.getMessage());
    }
    try (DirectoryStream<Path> entries = Files.newDirectoryStream(scriptDir, prefix + "*")) {
      for (Path other : entries) {
        if (!other.getFileName().toString().equals(name)) {
          Files.deleteIfExists(other);
        }
      }
    } catch (IOException e) {
      // only costs disk space
    }
    return path;
  }
}
