"""Let ``import garage`` come before ``import garage_promp``.

garage 2021.3 cannot be imported on today's stack until
:mod:`garage_promp._garage_compat` has installed its import hooks (garage
imports TensorFlow and Ray at module level). ``import garage_promp`` does that
first, so the rule is "import garage_promp before garage". This module lifts
the rule: ``python -m garage_promp._import_order`` (run by
``scripts/install.sh``) writes a two-line startup hook into the environment's
site-packages (``garage_promp_import_order.pth`` and the module it imports).
At interpreter start-up the hook only registers a finder; when ``garage`` is
first imported, the finder loads ``_garage_compat`` from this package's
directory and applies its import hooks, then steps aside, and garage imports
normally. Nothing else is patched until ``garage_promp`` itself is imported.

``python -m garage_promp._import_order --uninstall`` removes the two files.
"""
import pathlib
import sys
import sysconfig

PTH_NAME = 'garage_promp_import_order.pth'
MODULE_NAME = '_garage_promp_import_order'

HOOK_SOURCE = '''\
"""Written by garage_promp (python -m garage_promp._import_order): lets
``import garage`` come before ``import garage_promp``."""
import importlib.util
import sys


class _GaragePrompFirst:
    """On the first ``import garage``, apply garage_promp's import hooks."""

    def find_spec(self, name, path=None, target=None):
        if name != 'garage' or 'garage_promp._garage_compat' in sys.modules:
            return None
        sys.meta_path.remove(self)
        package = importlib.util.find_spec('garage_promp')
        if package is None or not package.submodule_search_locations:
            return None  # garage_promp was uninstalled: import garage as is
        location = list(package.submodule_search_locations)[0] + '/_garage_compat.py'
        spec = importlib.util.spec_from_file_location('garage_promp._garage_compat', location)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        module.apply_import_hooks()
        return None


sys.meta_path.insert(0, _GaragePrompFirst())
'''


def install(site_dir=None):
    """Write the hook into ``site_dir`` (default: this interpreter's purelib)."""
    site = pathlib.Path(site_dir or sysconfig.get_paths()['purelib'])
    (site / f'{MODULE_NAME}.py').write_text(HOOK_SOURCE)
    (site / PTH_NAME).write_text(f'import {MODULE_NAME}\n')
    return site


def uninstall(site_dir=None):
    """Remove the hook's two files from ``site_dir``."""
    site = pathlib.Path(site_dir or sysconfig.get_paths()['purelib'])
    for name in (PTH_NAME, f'{MODULE_NAME}.py'):
        (site / name).unlink(missing_ok=True)
    return site


if __name__ == '__main__':
    if sys.argv[1:] == ['--uninstall']:
        print(f'removed the garage import-order hook from {uninstall()}')
    else:
        print(f'installed the garage import-order hook in {install()}')
