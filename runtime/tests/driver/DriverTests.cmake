# Reads driver-tests.txt and adds each of its records as one ctest test,
# driver.NAME, run by RunAndCheck.cmake. The table's format is described at
# its top.

# Characters that CMake list handling would act on (';' splits, '[' ']'
# group, '\' escapes) stand in for themselves while the table is split
# into lines, and are put back in each value.
string(ASCII 1 _asrt_semicolon)
string(ASCII 2 _asrt_open)
string(ASCII 3 _asrt_close)
string(ASCII 4 _asrt_backslash)

function(_asrt_table_error where message)
  message(FATAL_ERROR "${where}: ${message}")
endfunction()

# `value` with its list-special characters restored and each @NAME@
# replaced by the variable NAME (which must be defined).
function(_asrt_table_value _out _value _where)
  string(REPLACE "${_asrt_semicolon}" ";" _value "${_value}")
  string(REPLACE "${_asrt_open}" "[" _value "${_value}")
  string(REPLACE "${_asrt_close}" "]" _value "${_value}")
  string(REPLACE "${_asrt_backslash}" "\\" _value "${_value}")
  string(REGEX MATCHALL "@[A-Za-z0-9_]+@" _names "${_value}")
  list(REMOVE_DUPLICATES _names)
  foreach(_placeholder IN LISTS _names)
    string(REGEX REPLACE "^@(.*)@$" "\\1" _name "${_placeholder}")
    if(NOT DEFINED ${_name})
      _asrt_table_error("${_where}" "@${_name}@ names nothing defined")
    endif()
    string(REPLACE "${_placeholder}" "${${_name}}" _value "${_value}")
  endforeach()
  set(${_out} "${_value}" PARENT_SCOPE)
endfunction()

# A command line of the table as RunAndCheck's "@@"-joined words.
function(_asrt_table_command _out _line _where)
  _asrt_table_value(_line "${_line}" "${_where}")
  separate_arguments(_words UNIX_COMMAND "${_line}")
  list(JOIN _words "@@" _joined)
  set(${_out} "${_joined}" PARENT_SCOPE)
endfunction()

# Adds the record collected in the caller's R_* variables.
macro(_asrt_table_add_test)
  if(R_NAME STREQUAL "")
    # Nothing collected yet.
  elseif(NOT R_HAS_RUN)
    _asrt_table_error("${R_WHERE}" "test ${R_NAME} has no 'run' line")
  elseif(R_SKIP)
    # Its requirement is not met in this build.
  else()
    if(R_NAME IN_LIST _asrt_table_names)
      _asrt_table_error("${R_WHERE}" "test ${R_NAME} is defined twice")
    endif()
    list(APPEND _asrt_table_names ${R_NAME})
    add_test(NAME driver.${R_NAME}
      COMMAND ${CMAKE_COMMAND} "-DCMD=${R_CMD}" "-DEXPECT=${R_EXPECT}"
              "-DREJECT=${R_REJECT}" "-DBEFORE=${R_BEFORE}"
              "-DAFTER=${R_AFTER}" "-DFILE_EXPECT=${R_FILE_EXPECT}"
              "-DEXPECT_RC=${R_STATUS}" "-DOUTPUT_FILE=${R_LOG}"
              "-DCHECK_FILE=${R_FILE}" "-DBEFORE_OUTPUT_FILE=${R_BEFORE_LOG}"
              "-DCMD_TIMEOUT=${R_TIMEOUT}" "-DCMD_WITHIN=${R_WITHIN}"
              -P ${CMAKE_CURRENT_SOURCE_DIR}/RunAndCheck.cmake)
    # A TMPDIR per test: OpenMPI 4.1's mpirun fails to start ("mkdir ...
    # File exists") when two create their session directory in one TMPDIR
    # at the same moment.
    set_tests_properties(driver.${R_NAME} PROPERTIES
      LABELS mpi TIMEOUT 120
      ENVIRONMENT "OPENBLAS_NUM_THREADS=1;TMPDIR=${out}/mpi-tmp/${R_NAME}")
  endif()
  foreach(_key NAME CMD EXPECT REJECT BEFORE AFTER FILE_EXPECT LOG FILE
          BEFORE_LOG TIMEOUT WITHIN SKIP HAS_RUN)
    set(R_${_key} "")
  endforeach()
  set(R_STATUS 0)
endmacro()

# Appends `_item` to the "@@"-joined list in `_var`, with `_separator`
# (empty: none) as an item between.
function(_asrt_table_append _var _item _separator)
  if("${${_var}}" STREQUAL "")
    set(${_var} "${_item}" PARENT_SCOPE)
  elseif("${_separator}" STREQUAL "")
    set(${_var} "${${_var}}@@${_item}" PARENT_SCOPE)
  else()
    set(${_var} "${${_var}}@@${_separator}@@${_item}" PARENT_SCOPE)
  endif()
endfunction()

# `requirements`: name -> whether this build has it, as NAME=ON|OFF items.
function(asrt_add_driver_tests table requirements)
  # An edited table reconfigures the build, so ctest runs what it says.
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${table}")
  file(READ "${table}" text)
  string(REPLACE ";" "${_asrt_semicolon}" text "${text}")
  string(REPLACE "[" "${_asrt_open}" text "${text}")
  string(REPLACE "]" "${_asrt_close}" text "${text}")
  string(REPLACE "\\" "${_asrt_backslash}" text "${text}")
  string(REPLACE "\n" ";" lines "${text}")

  set(_asrt_table_names "")
  set(R_NAME "")
  _asrt_table_add_test()
  set(line_number 0)
  set(pending "")
  foreach(line IN LISTS lines)
    math(EXPR line_number "${line_number} + 1")
    # A command continues on the next line after a trailing backslash.
    if(NOT pending STREQUAL "")
      string(REGEX REPLACE "^ +" "" line "${line}")
      set(line "${pending} ${line}")
      set(pending "")
    else()
      set(where "${table}:${line_number}")
    endif()
    if(line MATCHES "^(.*) ${_asrt_backslash}$")
      set(pending "${CMAKE_MATCH_1}")
      continue()
    endif()
    if(line MATCHES "^[ ]*(#|$)")
      continue()
    endif()
    if(line MATCHES "^test ([a-z0-9_]+)$")
      _asrt_table_add_test()
      set(R_NAME "${CMAKE_MATCH_1}")
      set(R_WHERE "${where}")
      continue()
    endif()
    if(NOT line MATCHES "^  ([a-z-]+) +(.*[^ ])[ ]*$")
      _asrt_table_error("${where}"
        "expected 'test NAME' or an indented 'KEY VALUE' line")
    endif()
    set(key "${CMAKE_MATCH_1}")
    set(value "${CMAKE_MATCH_2}")
    if(R_NAME STREQUAL "")
      _asrt_table_error("${where}" "'${key}' before the first 'test NAME'")
    endif()
    # A record whose requirement this build lacks is not read further: its
    # placeholders may name binaries that were not built (a runtime
    # configured alone without CUDA has no @fake_async_nccl_ws2@).
    if(key STREQUAL "run")
      set(R_HAS_RUN ON)
    endif()
    if(R_SKIP AND NOT key STREQUAL "requires")
      continue()
    endif()
    # Regexes keep their backslashes; \n stands for a newline.
    set(regex "${value}")
    string(REPLACE "${_asrt_backslash}n" "\n" regex "${regex}")
    if(key STREQUAL "run")
      _asrt_table_command(R_CMD "${value}" "${where}")
    elseif(key STREQUAL "before" OR key STREQUAL "after")
      _asrt_table_command(command "${value}" "${where}")
      string(TOUPPER "${key}" upper)
      _asrt_table_append(R_${upper} "${command}" THEN)
    elseif(key STREQUAL "expect" OR key STREQUAL "reject" OR
           key STREQUAL "file-expect")
      _asrt_table_value(regex "${regex}" "${where}")
      string(TOUPPER "${key}" upper)
      string(REPLACE "-" "_" upper "${upper}")
      _asrt_table_append(R_${upper} "${regex}" "")
    elseif(key STREQUAL "status")
      if(NOT value MATCHES "^([0-9]+|nonzero)$")
        _asrt_table_error("${where}" "status '${value}' is not a number or nonzero")
      endif()
      set(R_STATUS "${value}")
    elseif(key STREQUAL "timeout")
      if(NOT value MATCHES "^[0-9]+$")
        _asrt_table_error("${where}" "timeout '${value}' is not seconds")
      endif()
      set(R_TIMEOUT "${value}")
    elseif(key STREQUAL "within")
      if(NOT value MATCHES "^[0-9]+(\\.[0-9]+)?$")
        _asrt_table_error("${where}" "within '${value}' is not seconds")
      endif()
      set(R_WITHIN "${value}")
    elseif(key STREQUAL "log" OR key STREQUAL "before-log" OR
           key STREQUAL "file")
      _asrt_table_value(path "${value}" "${where}")
      string(TOUPPER "${key}" upper)
      string(REPLACE "-" "_" upper "${upper}")
      set(R_${upper} "${path}")
    elseif(key STREQUAL "requires")
      if(NOT value MATCHES "^(no-)?([a-z0-9-]+)$")
        _asrt_table_error("${where}" "requires '${value}'")
      endif()
      set(negate "${CMAKE_MATCH_1}")
      set(feature "${CMAKE_MATCH_2}")
      list(FIND requirements "${feature}=ON" on)
      list(FIND requirements "${feature}=OFF" off)
      if(on EQUAL -1 AND off EQUAL -1)
        _asrt_table_error("${where}" "requires an unknown '${feature}' (known: ${requirements})")
      endif()
      if((negate AND on GREATER -1) OR (NOT negate AND off GREATER -1))
        set(R_SKIP ON)
      endif()
    else()
      _asrt_table_error("${where}" "unknown key '${key}'")
    endif()
  endforeach()
  _asrt_table_add_test()
endfunction()
