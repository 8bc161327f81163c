# Runs a command for a ctest test and checks its exit status and output.
# Lists use "@@" between items (ctest would split on ';').
#   CMD          the command
#   EXPECT_RC    its expected exit status (default 0), or "nonzero"
#   CMD_TIMEOUT  seconds it may run before it is killed and the test fails
#                (default: no limit but ctest's)
#   CMD_WITHIN   seconds (a decimal) within which it must have ended, by
#                the wall clock; its time is printed ("elapsed: S s") in any
#                case
#   EXPECT       regexes its stdout + stderr must match
#   REJECT       regexes its stdout + stderr must not match
#   OUTPUT_FILE  where to save its stdout + stderr
#   BEFORE       commands to run first, which must succeed; the item THEN
#                separates commands
#   BEFORE_OUTPUT_FILE  where to save the BEFORE commands' stdout + stderr
#   AFTER        commands to run last (separated by THEN), which must succeed
#   CHECK_FILE, FILE_EXPECT   a file and regexes its contents must match
cmake_minimum_required(VERSION 3.20)

function(split out value)
  string(REPLACE "@@" ";" items "${value}")
  set(${out} "${items}" PARENT_SCOPE)
endfunction()

# Appends to `failures_var` each regex of `regexes` ("@@" between them)
# that `text` does not match (`must_match`) or matches (not `must_match`).
# The regexes are split at "@@" alone, not as a CMake list: one may hold a
# ';' or an unbalanced '['.
function(check_regexes failures_var label text regexes must_match)
  set(failures "${${failures_var}}")
  set(rest "${regexes}")
  while(NOT rest STREQUAL "")
    string(FIND "${rest}" "@@" at)
    if(at EQUAL -1)
      set(re "${rest}")
      set(rest "")
    else()
      string(SUBSTRING "${rest}" 0 ${at} re)
      math(EXPR at "${at} + 2")
      string(SUBSTRING "${rest}" ${at} -1 rest)
    endif()
    if(text MATCHES "${re}")
      if(NOT must_match)
        string(APPEND failures "${label} matches what it must not: ${re}\n")
      endif()
    elseif(must_match)
      string(APPEND failures "${label} does not match: ${re}\n")
    endif()
  endwhile()
  set(${failures_var} "${failures}" PARENT_SCOPE)
endfunction()

function(run_one label command log)
  execute_process(COMMAND ${command} RESULT_VARIABLE rc
                  OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message("${label}: ${command}\n${out}${err}")
  if(log)
    file(APPEND "${log}" "${out}${err}")
  endif()
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${label} command failed with status ${rc}")
  endif()
endfunction()

# Runs each THEN-separated command of `value`; `log` (may be empty)
# collects their output.
function(run_required label value log)
  if(value STREQUAL "")
    return()
  endif()
  if(log)
    file(WRITE "${log}" "")
  endif()
  split(items "${value}")
  set(command "")
  foreach(item IN LISTS items)
    if(item STREQUAL "THEN")
      run_one("${label}" "${command}" "${log}")
      set(command "")
    else()
      list(APPEND command "${item}")
    endif()
  endforeach()
  run_one("${label}" "${command}" "${log}")
endfunction()

if(NOT DEFINED EXPECT_RC)
  set(EXPECT_RC 0)
endif()

run_required(BEFORE "${BEFORE}" "${BEFORE_OUTPUT_FILE}")

split(command "${CMD}")
set(limit "")
if(CMD_TIMEOUT)
  set(limit TIMEOUT ${CMD_TIMEOUT})
endif()
string(TIMESTAMP started_us "%s%f" UTC)
execute_process(COMMAND ${command} RESULT_VARIABLE rc ${limit}
                OUTPUT_VARIABLE out ERROR_VARIABLE err)
string(TIMESTAMP ended_us "%s%f" UTC)
math(EXPR elapsed_ms "(${ended_us} - ${started_us}) / 1000")
math(EXPR elapsed_s "${elapsed_ms} / 1000")
math(EXPR elapsed_frac "${elapsed_ms} % 1000")
string(LENGTH "${elapsed_frac}" digits)
if(digits LESS 3)
  string(REPEAT "0" 3 pad)
  math(EXPR cut "3 - ${digits}")
  string(SUBSTRING "${pad}" 0 ${cut} pad)
  set(elapsed_frac "${pad}${elapsed_frac}")
endif()
set(all "${out}${err}")
message("command: ${command}\nstatus: ${rc}\nelapsed: ${elapsed_s}.${elapsed_frac} s\n--- output ---\n${all}--------------")
if(OUTPUT_FILE)
  file(WRITE "${OUTPUT_FILE}" "${all}")
endif()

set(failures "")
if(EXPECT_RC STREQUAL "nonzero")
  # A number: a timeout leaves a message in rc instead.
  if(NOT rc MATCHES "^[0-9]+$" OR rc EQUAL 0)
    string(APPEND failures "exit status ${rc}, expected a failure\n")
  endif()
elseif(NOT rc STREQUAL EXPECT_RC)
  string(APPEND failures "exit status ${rc}, expected ${EXPECT_RC}\n")
endif()
if(CMD_WITHIN)
  # In milliseconds, as integers: CMake's math has no decimals.
  string(REGEX MATCH "^([0-9]+)(\\.([0-9]*))?$" _ "${CMD_WITHIN}")
  set(whole "${CMAKE_MATCH_1}")
  string(SUBSTRING "${CMAKE_MATCH_3}000" 0 3 frac)
  math(EXPR within_ms "${whole} * 1000 + ${frac}")
  if(elapsed_ms GREATER within_ms)
    string(APPEND failures "it ran ${elapsed_s}.${elapsed_frac} s, longer "
           "than the ${CMD_WITHIN} s it must end within\n")
  endif()
endif()
check_regexes(failures "output" "${all}" "${EXPECT}" TRUE)
check_regexes(failures "output" "${all}" "${REJECT}" FALSE)
if(failures)
  message(FATAL_ERROR "${failures}")
endif()

if(CHECK_FILE)
  file(READ "${CHECK_FILE}" contents)
  message("--- ${CHECK_FILE} ---\n${contents}")
  set(file_failures "")
  check_regexes(file_failures "${CHECK_FILE}" "${contents}" "${FILE_EXPECT}"
                TRUE)
  if(file_failures)
    message(FATAL_ERROR "${file_failures}")
  endif()
endif()

run_required(AFTER "${AFTER}" "")
