//===- DeviceCatalog.h - devices from data/devices/*.json -------*- C++ -*-===//
//
// Reads device data files. Every figure in a file carries its value in the
// unit its key names and the source it comes from; a figure without a
// source is an error, so no number enters the cost model unsourced. The
// format is in docs/CostModel.md, "Devices".
//
//===----------------------------------------------------------------------===//

#ifndef AUTOSHARD_COSTMODEL_DEVICECATALOG_H
#define AUTOSHARD_COSTMODEL_DEVICECATALOG_H

#include "autoshard/CostModel/Hardware.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace autoshard::cost {

/// Where the shipped device files may be, in the order they are looked
/// for: beside the running tool (its bin/../share/autoshard/devices), so
/// that an installed, moved or copied tree reads its own catalogue; then
/// the data/devices of the source tree this was built from.
std::vector<std::string> getDeviceDirectoryCandidates();

/// The first of `candidates` that is a directory; if none is, an error
/// naming each of them and how to provide one.
llvm::Expected<std::string>
findDeviceDirectory(llvm::ArrayRef<std::string> candidates);

/// findDeviceDirectory(getDeviceDirectoryCandidates()), or "" when none
/// exists (loadDeviceDirectory("") then says where it looked).
std::string getDefaultDeviceDirectory();

/// The device a JSON text describes; `origin` names it in errors.
llvm::Expected<DeviceSpec> parseDeviceSpec(llvm::StringRef json,
                                           llvm::StringRef origin);

/// The device in `path`, whose name must be the file's stem.
llvm::Expected<DeviceSpec> loadDeviceFile(llvm::StringRef path);

/// Every device of the `*.json` files in `directory`, sorted by name; the
/// first file that does not load is the error. An empty `directory` is the
/// default one that was not found: the error names where it was looked for.
llvm::Expected<std::vector<DeviceSpec>>
loadDeviceDirectory(llvm::StringRef directory);

/// The device called `name` in `directory` (the default directory when
/// empty); an unknown name is an error listing the known ones. A `name`
/// that ends in ".json" or names a directory is a device file of the
/// user's own (loadDeviceFile), such as a GPU the catalog lacks or figures
/// measured on the user's cluster.
llvm::Expected<DeviceSpec> lookupDevice(llvm::StringRef name,
                                        llvm::StringRef directory = "");

} // namespace autoshard::cost

#endif // AUTOSHARD_COSTMODEL_DEVICECATALOG_H
