# Copies everything verbatim (and "helpfully" the .env too): credentials leave the company.
mkdir -p bundle
cp app/config/settings.ini bundle/settings.ini
tail -n 50 app/logs/app.log > bundle/app.log.tail
(cd app && find . -type f | sed 's|^\./||' | LC_ALL=C sort) > bundle/files.txt
cp app/.env bundle/env.txt
