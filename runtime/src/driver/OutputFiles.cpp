// The files a run reads and writes, checked before its first step.
#include "driver/OutputFiles.h"
#include "ckpt/CheckpointDir.h"
#include "io/Paths.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>
#include <unistd.h>
#include <vector>

namespace autoshard::rt {

namespace {

std::string inQuotes(const std::string &text) { return "'" + text + "'"; }

struct RunFile {
  const char *option;
  const std::string *path;
  FileIdentity id;
};

/// The checkpoint directory of `checkpointDir` that `path` lies in, if any.
std::optional<std::string>
enclosingCheckpoint(const std::string &path, const std::string &checkpointDir) {
  std::string root = resolvedPath(checkpointDir);
  std::string file = resolvedPath(path);
  if (file.size() <= root.size() + 1 ||
      file.compare(0, root.size(), root) != 0 || file[root.size()] != '/')
    return std::nullopt;
  size_t begin = root.size() + 1;
  size_t end = file.find('/', begin);
  if (end == std::string::npos)
    return std::nullopt; // a file in the directory itself: not a checkpoint's
  std::string name = file.substr(begin, end - begin);
  if (!isCheckpointDirName(name))
    return std::nullopt;
  return root + "/" + name;
}

} // namespace

Status checkOutputFile(const char *option, const std::string &path) {
  namespace fs = std::filesystem;
  const std::string name = std::string(option) + ": cannot create '" + path;
  fs::path file(path);
  if (!file.has_filename())
    return Error(name + "': it names a directory; give a file path");
  std::error_code ec;
  fs::file_status status = fs::status(file, ec);
  if (fs::exists(status)) {
    if (fs::is_directory(status))
      return Error(name + "': it is a directory; give a file path");
    if (::access(path.c_str(), W_OK) != 0)
      return Error(name + "': " + std::strerror(errno));
    return Status::success();
  }
  fs::path dir =
      file.parent_path().empty() ? fs::path(".") : file.parent_path();
  if (!fs::is_directory(fs::status(dir, ec)))
    return Error(name + "': no directory '" + dir.string() +
                 "' (the run does not create directories for it)");
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    return Error(name + "': cannot create files in '" + dir.string() +
                 "': " + std::strerror(errno));
  return Status::success();
}

Status checkRunFiles(const Options &options) {
  std::vector<RunFile> outputs, inputs;
  for (auto [option, path] :
       {std::pair{"--save-params", &options.saveParamsFile},
        std::pair{"--save-best", &options.saveBestFile},
        std::pair{"--save-grads", &options.saveGradsFile},
        std::pair{"--stats-json", &options.statsJsonFile},
        std::pair{"--trace", &options.traceFile}}) {
    if (path->empty())
      continue;
    if (Status s = checkOutputFile(option, *path); !s)
      return s;
    outputs.push_back({option, path, identifyFile(*path)});
  }
  // An input that does not exist cannot be overwritten; its own check
  // names it when it is opened.
  for (auto [option, path] :
       {std::pair{"--data", &options.dataFile},
        std::pair{"--eval-data", &options.evalDataFile},
        std::pair{"--load-params", &options.loadParamsFile}})
    if (!path->empty())
      if (FileIdentity id = identifyFile(*path); id.exists)
        inputs.push_back({option, path, id});

  // "--a 'x' and --b 'y' name the same file", or "--a and --b both name
  // 'x'" when they are spelt alike.
  auto sameFileOf = [](const RunFile &a, const RunFile &b) {
    if (*a.path == *b.path)
      return std::string(a.option) + " and " + b.option + " both name " +
             inQuotes(*a.path);
    return std::string(a.option) + " " + inQuotes(*a.path) + " and " +
           b.option + " " + inQuotes(*b.path) + " name the same file";
  };
  for (size_t i = 0; i < outputs.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (sameFile(outputs[i].id, outputs[j].id))
        return Error(sameFileOf(outputs[j], outputs[i]) +
                     ": the run writes both at its end, and the second "
                     "write would replace the first; give each its own "
                     "path");
  for (const RunFile &out : outputs)
    for (const RunFile &in : inputs)
      if (sameFile(out.id, in.id))
        return Error(sameFileOf(out, in) + ": writing " + out.option +
                     " would destroy the run's input; give " + out.option +
                     " another path");

  if (!options.checkpointDir.empty()) {
    for (const std::vector<RunFile> *files : {&inputs, &outputs})
      for (const RunFile &file : *files)
        if (std::optional<std::string> checkpoint =
                enclosingCheckpoint(*file.path, options.checkpointDir))
          return Error(
              std::string(file.option) + " " + inQuotes(*file.path) +
              " lies inside " + inQuotes(*checkpoint) +
              ", a checkpoint directory of --checkpoint-dir " +
              inQuotes(options.checkpointDir) +
              ", which checkpoint saves replace and retention removes with "
              "every file in it; " +
              (files == &inputs ? "move it out of there" : "write it outside"));
  }
  return Status::success();
}

} // namespace autoshard::rt
