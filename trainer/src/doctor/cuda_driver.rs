//! The CUDA driver API, for what libtorch does not tell: the driver version
//! and each GPU's name, memory, compute capability and multiprocessors.
//!
//! The driver (`libcuda.so.1`) comes with the NVIDIA kernel driver, not with
//! libtorch, so it is opened at run time with `dlopen`: where it is missing
//! `mixzero doctor` says so instead of failing to start. All the unsafe code
//! of the doctor is here; each call's signature is the one in CUDA's
//! `cuda.h`.

use std::ffi::{c_char, c_int, c_uint, CStr};

use libloading::{Library, Symbol};

const LIBRARY: &str = "libcuda.so.1";

/// `CUresult`: 0 is `CUDA_SUCCESS`.
type CuResult = c_int;
/// `CUdevice`: a device ordinal as the driver knows it.
type CuDevice = c_int;

/// `CUdevice_attribute` values.
const ATTRIBUTE_MULTIPROCESSOR_COUNT: c_int = 16;
const ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: c_int = 75;
const ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: c_int = 76;

/// Which step of talking to the driver failed.
#[derive(Debug, thiserror::Error)]
pub enum DriverError {
    #[error("cannot open {LIBRARY}")]
    Open {
        #[source]
        error: libloading::Error,
    },
    #[error("{LIBRARY} lacks {symbol}")]
    Symbol {
        symbol: &'static str,
        #[source]
        error: libloading::Error,
    },
    #[error("{call} failed: {name} ({code})")]
    Call {
        call: &'static str,
        code: CuResult,
        name: String,
    },
}

/// The driver and, unless initialising it or asking about them failed, its
/// devices.
#[derive(Debug)]
pub struct Driver {
    /// The newest CUDA version the driver supports, as `(major, minor)`.
    pub cuda_version: (i32, i32),
    pub devices: Result<Vec<GpuDevice>, DriverError>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuDevice {
    pub name: String,
    pub total_memory_bytes: u64,
    pub compute_capability: (i32, i32),
    pub multiprocessors: i32,
}

/// The driver's entry points, borrowed from the open library.
struct Api<'lib> {
    get_error_name: Symbol<'lib, unsafe extern "C" fn(CuResult, *mut *const c_char) -> CuResult>,
    init: Symbol<'lib, unsafe extern "C" fn(c_uint) -> CuResult>,
    driver_get_version: Symbol<'lib, unsafe extern "C" fn(*mut c_int) -> CuResult>,
    device_get_count: Symbol<'lib, unsafe extern "C" fn(*mut c_int) -> CuResult>,
    device_get: Symbol<'lib, unsafe extern "C" fn(*mut CuDevice, c_int) -> CuResult>,
    device_get_name: Symbol<'lib, unsafe extern "C" fn(*mut c_char, c_int, CuDevice) -> CuResult>,
    device_total_mem: Symbol<'lib, unsafe extern "C" fn(*mut usize, CuDevice) -> CuResult>,
    device_get_attribute:
        Symbol<'lib, unsafe extern "C" fn(*mut c_int, c_int, CuDevice) -> CuResult>,
}

/// Opens the driver and asks it about every device.
pub fn query() -> Result<Driver, DriverError> {
    // SAFETY: loading the driver runs only its own initialisers. It stays
    // loaded for the life of the process (leaked, never `dlclose`d): `cuInit`
    // starts threads inside it, and libtorch opens the same library.
    let library: &'static Library = Box::leak(Box::new(
        unsafe { Library::new(LIBRARY) }.map_err(|error| DriverError::Open { error })?,
    ));
    let api = Api::load(library)?;
    let mut version = 0;
    // SAFETY: a valid pointer to an int; allowed before `cuInit`.
    api.check("cuDriverGetVersion", unsafe {
        (api.driver_get_version)(&mut version)
    })?;
    Ok(Driver {
        // Encoded as 1000 * major + 10 * minor.
        cuda_version: (version / 1000, version % 1000 / 10),
        devices: api.devices(),
    })
}

impl<'lib> Api<'lib> {
    fn load(library: &'lib Library) -> Result<Api<'lib>, DriverError> {
        fn symbol<'lib, T>(
            library: &'lib Library,
            symbol: &'static str,
        ) -> Result<Symbol<'lib, T>, DriverError> {
            // SAFETY: every `T` below is the function's type in `cuda.h`.
            unsafe { library.get(symbol) }.map_err(|error| DriverError::Symbol { symbol, error })
        }
        Ok(Api {
            get_error_name: symbol(library, "cuGetErrorName")?,
            init: symbol(library, "cuInit")?,
            driver_get_version: symbol(library, "cuDriverGetVersion")?,
            device_get_count: symbol(library, "cuDeviceGetCount")?,
            device_get: symbol(library, "cuDeviceGet")?,
            device_get_name: symbol(library, "cuDeviceGetName")?,
            // `cuDeviceTotalMem` is a macro for the 64-bit `_v2` since CUDA 3.2.
            device_total_mem: symbol(library, "cuDeviceTotalMem_v2")?,
            device_get_attribute: symbol(library, "cuDeviceGetAttribute")?,
        })
    }

    /// Every device, after initialising the driver.
    fn devices(&self) -> Result<Vec<GpuDevice>, DriverError> {
        // SAFETY: plain calls with valid pointers to locals.
        unsafe {
            self.check("cuInit", (self.init)(0))?;
            let mut count = 0;
            self.check("cuDeviceGetCount", (self.device_get_count)(&mut count))?;
            (0..count).map(|ordinal| self.device(ordinal)).collect()
        }
    }

    /// # Safety
    ///
    /// The driver is initialised and `ordinal` is below its device count.
    unsafe fn device(&self, ordinal: c_int) -> Result<GpuDevice, DriverError> {
        let mut device = 0;
        self.check("cuDeviceGet", (self.device_get)(&mut device, ordinal))?;
        let mut name = [0u8; 256];
        self.check(
            "cuDeviceGetName",
            (self.device_get_name)(name.as_mut_ptr().cast(), name.len() as c_int, device),
        )?;
        let mut total_memory = 0;
        self.check(
            "cuDeviceTotalMem_v2",
            (self.device_total_mem)(&mut total_memory, device),
        )?;
        let attribute = |attribute| {
            let mut value = 0;
            self.check(
                "cuDeviceGetAttribute",
                (self.device_get_attribute)(&mut value, attribute, device),
            )
            .map(|()| value)
        };
        Ok(GpuDevice {
            name: match CStr::from_bytes_until_nul(&name) {
                Ok(name) => name.to_string_lossy().into_owned(),
                // A name as long as the buffer, cut without its NUL.
                Err(_) => String::from_utf8_lossy(&name).into_owned(),
            },
            total_memory_bytes: total_memory as u64,
            compute_capability: (
                attribute(ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
                attribute(ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
            ),
            multiprocessors: attribute(ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
        })
    }

    /// `Ok` for `CUDA_SUCCESS`, else the error with the driver's name for it.
    fn check(&self, call: &'static str, code: CuResult) -> Result<(), DriverError> {
        if code == 0 {
            return Ok(());
        }
        let mut name: *const c_char = std::ptr::null();
        // SAFETY: on success the driver points `name` at a static string.
        let found = unsafe { (self.get_error_name)(code, &mut name) } == 0 && !name.is_null();
        let name = if found {
            // SAFETY: checked above: a static NUL-terminated string.
            unsafe { CStr::from_ptr(name) }
                .to_string_lossy()
                .into_owned()
        } else {
            "unknown error".to_string()
        };
        Err(DriverError::Call { call, code, name })
    }
}
