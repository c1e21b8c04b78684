// Our own declarations of the part of the PJRT C API that torchtpu uses.
//
// Written from the published ABI (API 0.114, which the plugins we load agree
// with on every struct below: the CPU plugin wheel is 0.81, the JAX CUDA
// plugin 0.115). Rules we rely on:
//  - every args struct starts {size_t struct_size; void* extension_start;}
//    and struct_size is offsetof(last field) + sizeof(last field);
//  - plugins accept a struct_size larger than their own (they read the prefix
//    they know) and reject a smaller one, so we send the newest sizes;
//  - the PJRT_Api function table is append-only: slot k sits at byte 40 + 8k,
//    and a slot at or past api->struct_size does not exist in that plugin.
// tests/test_pjrt_abi.c checks these layouts against the header that the
// CPU plugin's wheel ships, when it is present. Only src/pjrt includes this.
#ifndef TPU_PJRT_ABI_H_
#define TPU_PJRT_ABI_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct PJRT_Error PJRT_Error;
typedef struct PJRT_Client PJRT_Client;
typedef struct PJRT_Device PJRT_Device;
typedef struct PJRT_DeviceDescription PJRT_DeviceDescription;
typedef struct PJRT_Memory PJRT_Memory;
typedef struct PJRT_Buffer PJRT_Buffer;
typedef struct PJRT_Event PJRT_Event;
typedef struct PJRT_Executable PJRT_Executable;
typedef struct PJRT_LoadedExecutable PJRT_LoadedExecutable;
typedef struct PJRT_SerializedExecutable PJRT_SerializedExecutable;

#define PJRT_HEAD            \
  size_t struct_size;        \
  void* extension_start
#define PJRT_SIZE(type, last) (offsetof(type, last) + sizeof(((type*)0)->last))

typedef enum { PJRT_NV_STRING = 0, PJRT_NV_INT64 = 1, PJRT_NV_INT64_LIST = 2,
               PJRT_NV_FLOAT = 3, PJRT_NV_BOOL = 4 } PJRT_NamedValue_Type;

typedef struct PJRT_NamedValue {
  PJRT_HEAD;
  const char* name;
  size_t name_size;
  PJRT_NamedValue_Type type;
  union {
    const char* string_value;
    int64_t int64_value;
    const int64_t* int64_array_value;
    float float_value;
    bool bool_value;
  };
  size_t value_size;
} PJRT_NamedValue;

typedef struct PJRT_Program {
  PJRT_HEAD;
  char* code;
  size_t code_size;
  const char* format;
  size_t format_size;
} PJRT_Program;

typedef struct PJRT_ExecuteOptions {
  PJRT_HEAD;
  void** send_callbacks;
  void** recv_callbacks;
  size_t num_send_ops;
  size_t num_recv_ops;
  int launch_id;
  const int64_t* non_donatable_input_indices;
  size_t num_non_donatable_input_indices;
  void* context;
  const char* call_location;
  size_t num_tasks;
  int* task_ids;
  int64_t* incarnation_ids;
  void* multi_slice_config;
  bool use_major_to_minor_data_layout_for_callbacks;
  void* hlo_output_callbacks;
  size_t num_hlo_output_callbacks;
} PJRT_ExecuteOptions;

enum { PJRT_HOST_IMMUTABLE_ONLY_DURING_CALL = 0,
       PJRT_HOST_IMMUTABLE_UNTIL_TRANSFER_COMPLETES = 1 };

typedef void (*PJRT_Event_OnReadyCallback)(PJRT_Error* error, void* user_arg);

// X(Name, slot index, last field, fields...) — one row per function we call.
// The args struct PJRT_<Name>_Args is generated from the fields.
#define PJRT_FUNCTION_LIST(X)                                                  \
  X(Error_GetCode, 2, code, const PJRT_Error* error; int code;)                \
  X(Plugin_Initialize, 3, extension_start, )                                   \
  X(Plugin_Attributes, 4, num_attributes,                                      \
    const PJRT_NamedValue* attributes; size_t num_attributes;)                 \
  X(Event_Destroy, 5, event, PJRT_Event* event;)                               \
  X(Event_IsReady, 6, is_ready, PJRT_Event* event; bool is_ready;)             \
  X(Event_Await, 8, event, PJRT_Event* event;)                                 \
  X(Event_OnReady, 9, user_arg, PJRT_Event* event;                             \
    PJRT_Event_OnReadyCallback callback; void* user_arg;)                      \
  X(Client_Create, 10, kv_try_get_user_arg,                                    \
    const PJRT_NamedValue* create_options; size_t num_options;                 \
    void* kv_get_callback; void* kv_get_user_arg; void* kv_put_callback;       \
    void* kv_put_user_arg; PJRT_Client* client; void* kv_try_get_callback;     \
    void* kv_try_get_user_arg;)                                                \
  X(Client_Destroy, 11, client, PJRT_Client* client;)                          \
  X(Client_PlatformName, 12, platform_name_size, PJRT_Client* client;          \
    const char* platform_name; size_t platform_name_size;)                     \
  X(Client_PlatformVersion, 14, platform_version_size, PJRT_Client* client;    \
    const char* platform_version; size_t platform_version_size;)               \
  X(Client_AddressableDevices, 16, num_addressable_devices,                    \
    PJRT_Client* client; PJRT_Device* const* addressable_devices;              \
    size_t num_addressable_devices;)                                           \
  X(Client_Compile, 20, executable, PJRT_Client* client;                       \
    const PJRT_Program* program; const char* compile_options;                  \
    size_t compile_options_size; PJRT_LoadedExecutable* executable;)           \
  X(Client_BufferFromHostBuffer, 22, buffer, PJRT_Client* client;              \
    const void* data; int type; const int64_t* dims; size_t num_dims;          \
    const int64_t* byte_strides; size_t num_byte_strides;                      \
    int host_buffer_semantics; PJRT_Device* device; PJRT_Memory* memory;       \
    void* device_layout; PJRT_Event* done_with_host_buffer;                    \
    PJRT_Buffer* buffer;)                                                      \
  X(DeviceDescription_Id, 23, id,                                              \
    PJRT_DeviceDescription* device_description; int id;)                       \
  X(DeviceDescription_Kind, 26, device_kind_size,                              \
    PJRT_DeviceDescription* device_description; const char* device_kind;       \
    size_t device_kind_size;)                                                  \
  X(DeviceDescription_ToString, 28, to_string_size,                            \
    PJRT_DeviceDescription* device_description; const char* to_string;         \
    size_t to_string_size;)                                                    \
  X(Device_GetDescription, 29, device_description, PJRT_Device* device;        \
    PJRT_DeviceDescription* device_description;)                               \
  X(Device_MemoryStats, 34, peak_allocated_bytes_is_set, PJRT_Device* device;  \
    int64_t bytes_in_use; int64_t peak_bytes_in_use;                           \
    bool peak_bytes_in_use_is_set; int64_t num_allocs; bool num_allocs_is_set; \
    int64_t largest_alloc_size; bool largest_alloc_size_is_set;                \
    int64_t bytes_limit; bool bytes_limit_is_set; int64_t bytes_reserved;      \
    bool bytes_reserved_is_set; int64_t peak_bytes_reserved;                   \
    bool peak_bytes_reserved_is_set; int64_t bytes_reservable_limit;           \
    bool bytes_reservable_limit_is_set; int64_t largest_free_block_bytes;      \
    bool largest_free_block_bytes_is_set; int64_t pool_bytes;                  \
    bool pool_bytes_is_set; int64_t peak_pool_bytes;                           \
    bool peak_pool_bytes_is_set; int64_t peak_allocated_bytes;                 \
    bool peak_allocated_bytes_is_set;)                                         \
  X(Executable_Destroy, 40, executable, PJRT_Executable* executable;)          \
  X(Executable_NumOutputs, 44, num_outputs, PJRT_Executable* executable;       \
    size_t num_outputs;)                                                       \
  X(Executable_Serialize, 49, serialized_executable_deleter,                   \
    const PJRT_Executable* executable; const char* serialized_bytes;           \
    size_t serialized_bytes_size;                                              \
    PJRT_SerializedExecutable* serialized_executable;                          \
    void (*serialized_executable_deleter)(PJRT_SerializedExecutable*);)        \
  X(LoadedExecutable_Destroy, 50, executable,                                  \
    PJRT_LoadedExecutable* executable;)                                        \
  X(LoadedExecutable_GetExecutable, 51, executable,                            \
    PJRT_LoadedExecutable* loaded_executable; PJRT_Executable* executable;)    \
  X(LoadedExecutable_Execute, 55, execute_device,                              \
    PJRT_LoadedExecutable* executable; PJRT_ExecuteOptions* options;           \
    PJRT_Buffer* const* const* argument_lists; size_t num_devices;             \
    size_t num_args; PJRT_Buffer** const* output_lists;                        \
    PJRT_Event** device_complete_events; PJRT_Device* execute_device;)         \
  X(Executable_DeserializeAndLoad, 56, load_options, PJRT_Client* client;      \
    const char* serialized_executable; size_t serialized_executable_size;      \
    PJRT_LoadedExecutable* loaded_executable;                                  \
    const char* overridden_serialized_compile_options;                         \
    size_t overridden_serialized_compile_options_size; void* load_options;)    \
  X(Buffer_Destroy, 58, buffer, PJRT_Buffer* buffer;)                          \
  X(Buffer_ElementType, 59, type, PJRT_Buffer* buffer; int type;)              \
  X(Buffer_Dimensions, 60, num_dims, PJRT_Buffer* buffer;                      \
    const int64_t* dims; size_t num_dims;)                                     \
  X(Buffer_OnDeviceSizeInBytes, 64, on_device_size_in_bytes,                   \
    PJRT_Buffer* buffer; size_t on_device_size_in_bytes;)                      \
  X(Buffer_CopyToDevice, 69, dst_buffer, PJRT_Buffer* buffer;                  \
    PJRT_Device* dst_device; PJRT_Buffer* dst_buffer;)                         \
  X(Buffer_ToHostBuffer, 70, event, PJRT_Buffer* src; void* host_layout;       \
    void* dst; size_t dst_size; PJRT_Event* event;)                            \
  X(Buffer_IsOnCpu, 71, is_on_cpu, PJRT_Buffer* buffer; bool is_on_cpu;)       \
  X(Buffer_ReadyEvent, 72, event, PJRT_Buffer* buffer; PJRT_Event* event;)     \
  X(Buffer_UnsafePointer, 73, buffer_pointer, PJRT_Buffer* buffer;             \
    uintptr_t buffer_pointer;)                                                 \
  X(Executable_GetCompiledMemoryStats, 96, host_temp_size_in_bytes,            \
    PJRT_Executable* executable; int64_t generated_code_size_in_bytes;         \
    int64_t argument_size_in_bytes; int64_t output_size_in_bytes;              \
    int64_t alias_size_in_bytes; int64_t temp_size_in_bytes;                   \
    int64_t host_generated_code_size_in_bytes;                                 \
    int64_t host_argument_size_in_bytes; int64_t host_output_size_in_bytes;    \
    int64_t host_alias_size_in_bytes; int64_t host_temp_size_in_bytes;)

#define PJRT_DECLARE_ARGS(name, slot, last, fields) \
  typedef struct PJRT_##name##_Args {              \
    PJRT_HEAD;                                     \
    fields                                         \
  } PJRT_##name##_Args;
PJRT_FUNCTION_LIST(PJRT_DECLARE_ARGS)
#undef PJRT_DECLARE_ARGS

// The two functions that return nothing.
typedef struct PJRT_Error_Destroy_Args {
  PJRT_HEAD;
  PJRT_Error* error;
} PJRT_Error_Destroy_Args;
typedef struct PJRT_Error_Message_Args {
  PJRT_HEAD;
  const PJRT_Error* error;
  const char* message;
  size_t message_size;
} PJRT_Error_Message_Args;
enum { PJRT_SLOT_ERROR_DESTROY = 0, PJRT_SLOT_ERROR_MESSAGE = 1 };

typedef struct PJRT_Api_Version {
  PJRT_HEAD;
  int major_version;
  int minor_version;
} PJRT_Api_Version;

// The function table: a header, then one pointer per slot.
typedef struct PJRT_Api {
  PJRT_HEAD;
  PJRT_Api_Version pjrt_api_version;
  void (*slots[])(void);
} PJRT_Api;

#define PJRT_SLOT_OFFSET(k) (offsetof(PJRT_Api, slots) + sizeof(void*) * (k))

#endif  // TPU_PJRT_ABI_H_
